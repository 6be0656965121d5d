"""``book --dialogue-voice``, voice tags and ``--cast`` in books: quoted speech (each language's quotation marks)
read by the dialogue voice and the narration by ``--voice``; tags in force carried from unit to unit, so a chapter
is one speech; a book with the dialogue voice is the book with the same tags written in, sample for sample, its
narration before the first quote unchanged, and a resumed run gives the same chapters."""

from __future__ import annotations

import numpy as np
import pytest
from book_inputs import SPEED, book_args

from kokoro_tvm_ext.book.plan import chapter_units, voiced_chapter
from kokoro_tvm_ext.book.sources import Chapter
from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.speech.markup import reading_tags, voice_quotes

sf = pytest.importorskip("soundfile")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("“Hi,” she said.", "[voice:D]“Hi,”[voice:N] she said."),
        ("„Hallo“, sagte sie.", "[voice:D]„Hallo“[voice:N], sagte sie."),
        ("« Bonjour », dit-elle.", "[voice:D]« Bonjour »[voice:N], dit-elle."),
        ("彼は「こんにちは」と言った。", "彼は[voice:D]「こんにちは」[voice:N]と言った。"),
        ("‘I don’t know,’ he said.", "[voice:D]‘I don’t know,’[voice:N] he said."),
        ('"Go," he said. "Now."', '[voice:D]"Go,"[voice:N] he said. [voice:D]"Now."[voice:N]'),
        ("The dogs’ bowls are empty.", "The dogs’ bowls are empty."),  # an apostrophe opens nothing
        ("No quotes here.", "No quotes here."),
    ],
)
def test_quoted_speech_in_each_languages_marks_is_the_dialogue_voice(text, expected):
    assert voice_quotes(text, "D", "N") == expected


def test_the_tags_in_force_carry_from_unit_to_unit():
    chapter = Chapter("", ("[voice:bm_george]One two three.", "Four [rate:1.5]five.", "Six [voice:af_heart]seven."))
    units = chapter_units(chapter, 0, 20)
    assert [(u.paragraphs, u.tags) for u in units] == [
        (("[voice:bm_george]One two three.",), ""),
        (("Four [rate:1.5]five.",), "[voice:bm_george]"),
        (("Six [voice:af_heart]seven.",), "[voice:bm_george][rate:1.5]"),
    ]
    assert reading_tags(units[-1].paragraphs[0], units[-1].tags) == "[voice:af_heart]"
    assert voiced_chapter(chapter, None, "x") is chapter


DIALOGUE_MD = """# Talk

The night was quiet and the road was long.

“Where are you going?” asked the stranger. I did not answer.

# After

“Home,” I said at last.
"""


def _read(out) -> list[np.ndarray]:
    return [sf.read(f, dtype="int16")[0] for f in sorted(out.glob("*.wav"))]


@pytest.mark.model
def test_the_dialogue_voice_is_the_same_book_with_tags_written_in(tmp_path, artifact, voice_file):
    narrator = str(voice_file)
    book = tmp_path / "talk.md"
    book.write_text(DIALOGUE_MD, encoding="utf-8")
    tagged = tmp_path / "tagged.md"
    tagged.write_text(voice_quotes(DIALOGUE_MD, "am_adam", narrator), encoding="utf-8")
    assert main(book_args(book, tmp_path / "dialogue", artifact, voice_file, "--dialogue-voice", "am_adam")) == 0
    assert main(book_args(tagged, tmp_path / "tags", artifact, voice_file)) == 0
    assert main(book_args(book, tmp_path / "plain", artifact, voice_file)) == 0
    dialogue, tags, plain = _read(tmp_path / "dialogue"), _read(tmp_path / "tags"), _read(tmp_path / "plain")
    assert len(dialogue) == 2
    for a, b in zip(dialogue, tags):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(dialogue[1], plain[1])  # the quote is another voice
    # The heading and the first paragraph come before any quote: the same samples as without the dialogue voice.
    from kokoro_tvm_ext import KokoroTVM
    from kokoro_tvm_ext.book.plan import chunk_seed
    from kokoro_tvm_ext.speech import Speaker

    speaker = Speaker(KokoroTVM(artifact))
    before = speaker.speak(
        "Talk\n\nThe night was quiet and the road was long.",
        str(voice_file),
        lang="a",
        speed=float(SPEED),
        chunk_seeds=lambda k: chunk_seed(0, 0, 0, k),
    )
    n = len(before.audio)
    np.testing.assert_array_equal(dialogue[0][:n], plain[0][:n])
    assert not np.array_equal(dialogue[0][n:], plain[0][n:])


@pytest.mark.model
def test_a_resumed_dialogue_book_gives_the_same_chapters(tmp_path, artifact, voice_file):
    from kokoro_tvm_ext.book.job import LocalExecutor, speak_book
    from kokoro_tvm_ext.book.render import Reading
    from kokoro_tvm_ext.book.resume import ChapterStore
    from kokoro_tvm_ext.book.sources import read_book
    from kokoro_tvm_ext.speech import Speaker, Voice

    book = tmp_path / "talk.md"
    book.write_text(DIALOGUE_MD, encoding="utf-8")
    chapters = read_book(book).chapters
    reading = Reading(Voice.load(str(voice_file), lang="a"), float(SPEED), 0, None, None, "am_adam")
    speaker = Speaker.load(artifact)
    whole = speak_book(
        chapters,
        LocalExecutor(speaker),
        reading,
        24000,
        ChapterStore(tmp_path / "a.m4b", "s"),
        quiet=True,
        unit_chars=60,
    )

    class StopAfterFirstChapter(LocalExecutor):
        def run(self, units, reading):
            for unit in units:
                if unit.chapter == 1:
                    raise KeyboardInterrupt
                yield from super().run([unit], reading)

    store = ChapterStore(tmp_path / "b.m4b", "s")
    with pytest.raises(KeyboardInterrupt):
        speak_book(chapters, StopAfterFirstChapter(speaker), reading, 24000, store, quiet=True, unit_chars=60)
    resumed = speak_book(chapters, LocalExecutor(speaker), reading, 24000, store, quiet=True, unit_chars=60)
    for a, b in zip(resumed, whole):
        np.testing.assert_array_equal(a.samples, b.samples)


def test_an_unknown_dialogue_voice_is_one_line(tmp_path, capsys, artifact, voice_file):
    book = tmp_path / "talk.md"
    book.write_text(DIALOGUE_MD, encoding="utf-8")
    code = main(book_args(book, tmp_path / "out", artifact, voice_file, "--dialogue-voice", "am_nobody"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "am_nobody" in err, err
    assert not (tmp_path / "out").exists()
