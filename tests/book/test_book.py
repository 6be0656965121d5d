"""`kokoro-tvm book` in one process on the small artifact: the samples equal solo synthesis of each
chunk, the .m4b carries the chapters, an interrupted book resumes without speaking finished
chapters again, and bad input is one line, a non-zero exit and no output."""

from __future__ import annotations

import numpy as np
import pytest
from book_inputs import SPEED, book_args, make_epub

from kokoro_tvm_ext.cli import main

sf = pytest.importorskip("soundfile")
av = pytest.importorskip("av")


def solo_reference(runtime, paragraphs: tuple[str, ...], chapter: int, pack, unit_chars: int):
    """A chapter spoken chunk by chunk, each a solo ``synthesize`` call with its position's seed and its edges
    kept as planned (speech/edges.py): a chunk per sentence, the chapter's first cut early (a chapter is one
    speech)."""
    from types import SimpleNamespace

    from kokoro_tvm_ext.book.plan import chapter_units, chunk_seed
    from kokoro_tvm_ext.book.sources import Chapter
    from kokoro_tvm_ext.model.spec import MAX_TOKENS
    from kokoro_tvm_ext.speech import FIRST_CHUNK_TOKENS, Speaker, Voice
    from kokoro_tvm_ext.speech.edges import edge_cut

    planner = Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))  # plans without a model
    voice = Voice("reference", pack, "a")
    pieces = []
    for unit in chapter_units(Chapter("", paragraphs), chapter, unit_chars):
        first = FIRST_CHUNK_TOKENS if unit.index == 0 else None
        plan = planner.plan("\n\n".join(unit.paragraphs), voice, first_chunk_tokens=first)
        for k, chunk in enumerate(plan.chunks):
            audio, _ = runtime.synthesize(
                chunk.tokens, chunk.style, speed=float(SPEED), noise_seed=chunk_seed(0, chapter, unit.index, k)
            )
            audio = edge_cut(audio, chunk.lead, chunk.tail).apply(audio)
            pieces.append(np.round(np.clip(audio, -1, 1) * 32767).astype(np.int16))
    return np.concatenate(pieces)


@pytest.fixture(scope="module")
def runtime(artifact):
    from kokoro_tvm_ext import KokoroTVM

    return KokoroTVM(artifact)


@pytest.fixture(scope="module")
def spoken(tmp_path_factory, artifact, voice_file):
    """The test book spoken once to a directory of WAVs (units of at most 60 characters): (book, its chapters'
    int16 samples)."""
    from book_inputs import BOOK_MD

    tmp = tmp_path_factory.mktemp("spoken")
    book = tmp / "book.md"
    book.write_text(BOOK_MD)
    assert main(book_args(book, tmp / "out", artifact, voice_file, "--unit-chars", "60")) == 0
    files = sorted((tmp / "out").glob("*.wav"))
    assert [f.name for f in files] == ["01 The Start.wav", "02 The End.wav"]
    assert not (tmp / ".out.book").exists()  # the work directory goes once the book is written
    chapters = []
    for f in files:
        samples, rate = sf.read(f, dtype="int16")
        assert rate == 24000
        chapters.append(samples)
    return book, chapters


def test_chapters_match_solo_synthesis_of_every_chunk(spoken, voice_file, runtime):
    from kokoro_tvm_ext.book.sources import read_book

    book, chapters = spoken
    pack = np.load(voice_file)
    for i, (samples, chapter) in enumerate(zip(chapters, read_book(book).chapters)):
        expected = solo_reference(runtime, chapter.paragraphs, i, pack, 60)
        assert samples.shape == expected.shape
        # Batched and solo calls tile the text stage differently: at most one 16-bit step apart.
        np.testing.assert_allclose(samples, expected, rtol=0, atol=1)


def test_m4b_has_a_chapter_marker_per_chapter_and_srt_files(tmp_path, spoken, artifact, voice_file):
    book, chapters = spoken
    lengths = [len(c) for c in chapters]
    out = tmp_path / "book.m4b"
    assert main(book_args(book, out, artifact, voice_file, "--unit-chars", "60", "--subtitles")) == 0
    with av.open(str(out)) as f:
        marks = f.chapters()
        duration = f.duration / 1e6
    assert [c["metadata"]["title"] for c in marks] == ["The Start", "The End"]
    starts = [float(c["start"] * c["time_base"]) for c in marks]
    assert starts == pytest.approx([0.0, lengths[0] / 24000], abs=0.01)
    assert duration == pytest.approx(sum(lengths) / 24000, abs=0.1)  # AAC adds priming and padding
    for i, n in enumerate(lengths, 1):
        srt = (tmp_path / f"book.{i:02d}.srt").read_text()
        last_end = srt.strip().split("\n\n")[-1].split("\n")[1].split(" --> ")[1]
        h, m, s = last_end.replace(",", ".").split(":")
        assert 0 < int(h) * 3600 + int(m) * 60 + float(s) <= n / 24000 + 1e-3  # within its chapter


class Interrupting:
    """Wraps an executor: records the units asked for; raises after ``stop_after`` results."""

    def __init__(self, inner, stop_after=None):
        self.inner, self.stop_after, self.asked = inner, stop_after, []

    def run(self, units, reading):
        self.asked += [u.key for u in units]
        for n, result in enumerate(self.inner.run(units, reading), 1):
            yield result
            if self.stop_after is not None and n >= self.stop_after:
                raise KeyboardInterrupt


def test_an_interrupted_book_resumes_without_redoing_finished_chapters(tmp_path, spoken, artifact, voice_file):
    from kokoro_tvm_ext.book.job import LocalExecutor, speak_book
    from kokoro_tvm_ext.book.render import Reading
    from kokoro_tvm_ext.book.resume import ChapterStore
    from kokoro_tvm_ext.book.sources import read_book
    from kokoro_tvm_ext.speech import Speaker, Voice

    book, full = spoken
    chapters = read_book(book).chapters
    reading = Reading(Voice.load(str(voice_file), lang="a"), float(SPEED), 0)
    speaker = Speaker.load(artifact)
    store = ChapterStore(tmp_path / "book.m4b", "s")
    # Chapter 0 is units 0-2 (its heading, then a paragraph each), chapter 1 is units 0-1.
    first = Interrupting(LocalExecutor(speaker), stop_after=4)
    with pytest.raises(KeyboardInterrupt):
        speak_book(chapters, first, reading, 24000, store, quiet=True, unit_chars=60)
    assert first.asked == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert len(list(store.dir.glob("*.npz"))) == 1  # chapter 0 kept; chapter 1's one unit is not a chapter
    again = Interrupting(LocalExecutor(speaker))
    resumed = speak_book(chapters, again, reading, 24000, store, quiet=True, unit_chars=60)
    assert again.asked == [(1, 0), (1, 1)]
    for a, b in zip(resumed, full):  # the uninterrupted run's samples
        np.testing.assert_array_equal(a.samples, b)
    # A changed chapter is spoken again; the unchanged one is still reused.
    from dataclasses import replace

    edited = [chapters[0], replace(chapters[1], paragraphs=(*chapters[1].paragraphs, "Really over."))]
    third = Interrupting(LocalExecutor(speaker))
    speak_book(edited, third, reading, 24000, store, quiet=True, unit_chars=60)
    assert {k[0] for k in third.asked} == {1}


def _no_outputs(tmp_path, names):
    left = [p.name for p in tmp_path.iterdir() if p.name not in names]
    assert left == [], left


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing", "no such file"),
        ("pdf", "unknown book format '.pdf'"),
        ("empty-epub", "no text to speak"),
        ("no-dir", "does not exist"),
        ("parent-is-file", "does not exist"),
        ("wav-output", "unknown output type '.wav'"),
    ],
)
def test_bad_input_is_one_line_nonzero_exit_and_no_output(tmp_path, capsys, case, message, voice_file):
    book, out = tmp_path / "book.md", tmp_path / "book.m4b"
    book.write_text("# One\n\nSome text.\n")
    if case == "missing":
        book = tmp_path / "absent.md"
    elif case == "pdf":
        book = tmp_path / "book.pdf"
        book.write_bytes(b"%PDF-1.4")
    elif case == "empty-epub":
        book = make_epub(tmp_path / "blank.epub", [("a.xhtml", '<img src="x.png"/>')], toc=[("A", "a.xhtml")])
    elif case == "no-dir":
        out = tmp_path / "nowhere" / "book.m4b"
    elif case == "parent-is-file":
        out = tmp_path / "book.md" / "book.m4b"
    elif case == "wav-output":
        out = tmp_path / "book.wav"
    before = {p.name for p in tmp_path.iterdir()}
    code = main(["book", str(book), "-o", str(out), "--voice", str(voice_file), "--lang", "a", "-q"])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1 and err.startswith("kokoro-tvm book: ") and message in err, err
    _no_outputs(tmp_path, before)


def test_mp3_carries_the_chapters_as_id3_chap_frames(tmp_path, spoken):
    from kokoro_tvm_ext.book.output import ChapterAudio, write_book
    from kokoro_tvm_ext.speech import Speech

    _, chapters = spoken
    out = tmp_path / "book.mp3"
    audio = [ChapterAudio(t, Speech(c, 24000, [])) for t, c in zip(("The Start", "The End"), chapters)]
    write_book(out, audio, 24000, title="B")
    with av.open(str(out)) as f:
        marks = f.chapters()
        assert f.metadata.get("title") == "B"
    assert [c["metadata"]["title"] for c in marks] == ["The Start", "The End"]
    assert [float(c["start"] * c["time_base"]) for c in marks] == pytest.approx([0, len(chapters[0]) / 24000], abs=0.01)
    assert [p.name for p in tmp_path.iterdir()] == ["book.mp3"]  # no temp file left
