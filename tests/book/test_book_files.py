"""`kokoro-tvm book`'s files, with the model replaced by fake_speech (every sample known, no compile): names
cut to the filesystem's byte limit, a long-title EPUB to a directory, a Ctrl-C and a SIGKILL during the final
write (a real process killed at a set moment), then a rerun that removes the killed run's temp files and
completes, and a second run on the same output refused while the first holds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from book_inputs import make_epub
from fake_speech import FakeExecutor, chapter_samples, fake_artifact, patch_model

from kokoro_tvm_ext.book.paths import ROOM, chapter_stems, cut, is_leftover, name_max
from kokoro_tvm_ext.cli import main

sf = pytest.importorskip("soundfile")
pytest.importorskip("av")

BOOK_TESTS = Path(__file__).parent
# 3 bytes a character in UTF-8: 80 characters were 240 bytes before the suffix, and two such titles
# that differ only past the cut must still get two files
LONG = "第一章 " + "漫長的標題" * 40
TITLES = [LONG, "📚" * 100, LONG + " 二", "Ready: set / go? " + "é" * 200]


@pytest.fixture
def long_title_book(tmp_path, voice_file):
    """(argv of a `book` run to tmp/out with the fakes' artifact, the book's chapters)."""
    from kokoro_tvm_ext.book.sources import read_book

    docs = [(f"c{i}.xhtml", f"<h1>{t}</h1><p>Chapter {i} says hello.</p>") for i, t in enumerate(TITLES)]
    book = make_epub(tmp_path / "long.epub", docs, toc=[(t, f"c{i}.xhtml") for i, t in enumerate(TITLES)])
    argv = ["book", str(book), "-o", str(tmp_path / "out"), "--artifact", str(fake_artifact(tmp_path / "art"))]
    argv += ["--voice", str(voice_file), "--lang", "a", "-q", "--subtitles"]
    return argv, read_book(book).chapters


@pytest.fixture
def fake_model(monkeypatch):
    patch_model(monkeypatch.setattr)
    FakeExecutor.asked.clear()


def assert_whole_book(out: Path, chapters) -> None:
    """One WAV and one .srt per chapter, each WAV the chapter's samples; names within the limit, unique."""
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 2 * len(chapters) and not [n for n in names if n.startswith(".")], names
    limit = name_max(out)
    for i, chapter in enumerate(chapters):
        (wav,) = [n for n in names if n.startswith(f"{i + 1:02d} ") and n.endswith(".wav")]
        assert f"{wav[:-4]}.srt" in names
        assert len(wav[:-4].encode()) <= limit - ROOM
        samples, rate = sf.read(out / wav, dtype="int16")
        assert rate == 24000
        np.testing.assert_array_equal(samples, chapter_samples(chapter, i, 1500))


def leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.endswith(".book")]


def test_names_are_cut_to_the_byte_limit_between_characters():
    assert cut("aé", 2) == "a"  # é is 2 bytes: not cut in half
    assert cut("📚📚", 7) == "📚"
    for limit in (40, 100, 223):
        stems = chapter_stems(TITLES + ["", ". ..", "a\u202eb\x00c\ud800d"], limit)
        assert all(len(s.encode()) <= limit for s in stems), stems
        assert len(set(stems)) == len(stems)  # the numbers keep them apart, however they are cut
        assert stems[:2] == [cut(f"01 {LONG}", limit), cut("02 " + "📚" * 100, limit)]
        assert stems[-3:] == ["05 chapter", "06 chapter", "07 abcd"]  # controls, a lone surrogate go
    assert chapter_stems(["x"] * 100, 50)[99] == "100 x"
    assert chapter_stems(["x"] * 100, 50)[0] == "001 x"  # numbers sort as text


def test_a_long_title_epub_to_a_directory_completes_with_names_within_the_limit(
    long_title_book, fake_model, tmp_path, capsys
):
    argv, chapters = long_title_book
    assert main(argv) == 0, capsys.readouterr().err
    assert_whole_book(tmp_path / "out", chapters)
    assert leftovers(tmp_path) == []


def test_ctrl_c_while_writing_leaves_no_file_of_the_book_and_says_what_is_kept(
    long_title_book, fake_model, tmp_path, capsys, monkeypatch
):
    import kokoro_tvm_ext.book.output as output

    argv, chapters = long_title_book
    write_audio, calls = output.write_audio, []

    def interrupted_on_the_third(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise KeyboardInterrupt
        write_audio(*args, **kwargs)

    monkeypatch.setattr(output, "write_audio", interrupted_on_the_third)
    assert main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert err == (
        f"kokoro-tvm book: interrupted; no file of the book was written to {tmp_path / 'out'}; "
        f"4 of 4 chapters are kept in {tmp_path / '.out.book'}: run the same command again to go on"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.book", "art", "long.epub"]  # not even out/
    monkeypatch.setattr(output, "write_audio", write_audio)
    FakeExecutor.asked.clear()
    assert main(argv) == 0
    assert FakeExecutor.asked == []  # every chapter came from the work directory
    assert_whole_book(tmp_path / "out", chapters)


# Runs `kokoro-tvm book` with the fakes and SIGKILLs itself at one moment of the final write.
KILLED_RUN = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import fake_speech
fake_speech.patch_model(setattr)
import kokoro_tvm_ext.speech.audio as audio
import kokoro_tvm_ext.support.cache as cache
moment, calls = sys.argv[2], []

def kill_on_the(n, original, path_of):
    def call(*args, **kwargs):
        if os.path.basename(os.path.dirname(path_of(args))) == "out":  # the book's, not the work directory's
            calls.append(args)
            if len(calls) == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    return call

if moment == "encoding":  # the third chapter's temp file is made and empty, two are whole
    audio.AudioEncoder = kill_on_the(3, audio.AudioEncoder, lambda args: args[0].name)  # its open temp file
else:  # the first file is renamed into place, the others are still temp files
    cache.os.replace = kill_on_the(2, os.replace, lambda args: args[1])
from kokoro_tvm_ext.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("moment", ["encoding", "renaming"])
def test_sigkill_during_the_final_write_then_a_rerun_removes_the_temp_files_and_completes(
    long_title_book, fake_model, tmp_path, moment, capsys
):
    argv, chapters = long_title_book
    out = tmp_path / "out"
    out.mkdir()
    (out / ".notes.tmp").write_text("mine")  # a user's files: not ours to remove
    (out / ".song.wav.abcdefgh.tmp").write_text("mine")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(BOOK_TESTS), moment, *argv], capture_output=True, timeout=120
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    temps = sorted(p.name for p in out.glob(".*.book-*.tmp"))
    if moment == "encoding":
        assert len(temps) == 3 and not list(out.glob("*.wav")), temps
    else:
        assert len(temps) == 7 and len(list(out.glob("0*"))) == 1, temps
    assert (tmp_path / ".out.book").is_dir()

    assert main(argv) == 0, capsys.readouterr().err
    assert FakeExecutor.asked == []  # the killed run had kept every chapter
    assert sorted(p.name for p in out.glob(".*")) == [".notes.tmp", ".song.wav.abcdefgh.tmp"]
    for name in (".notes.tmp", ".song.wav.abcdefgh.tmp"):
        (out / name).unlink()
    assert_whole_book(out, chapters)
    assert leftovers(tmp_path) == []


def test_temp_files_are_recognised_by_name():
    assert is_leftover(".01 Title.wav.book-ab_c9xyz.tmp")
    assert is_leftover(".01 Title.wav.ab_c9xyz.tmp")  # an older version's, untagged, of a chapter file
    assert not is_leftover(".song.wav.abcdefgh.tmp")  # untagged and not a chapter's name
    assert not is_leftover(".notes.tmp") and not is_leftover("01 Title.wav")
    import re

    mine = re.compile(r"book\.m4b|book\.\d+\.srt")
    assert is_leftover(".book.m4b.abcdefgh.tmp", mine) and is_leftover(".book.02.srt.book-abcdefgh.tmp", mine)
    assert not is_leftover(".other.m4b.book-abcdefgh.tmp", mine)  # another book beside this one


def test_a_second_run_on_the_same_output_is_refused_while_the_first_holds_it(
    long_title_book, fake_model, tmp_path, capsys
):
    from kokoro_tvm_ext.book.resume import ChapterStore

    argv, _ = long_title_book
    with ChapterStore(tmp_path / "out", "s").held("first"):
        assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another kokoro-tvm book is writing it" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art", "long.epub"]


@pytest.mark.parametrize(
    "case, message",
    [
        ("long-name", "give a shorter name"),
        ("file-as-dir", "exists and is not a directory"),
        ("proc", "does not accept new files"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_speech(
    long_title_book, fake_model, tmp_path, capsys, case, message
):
    argv, _ = long_title_book
    out = {
        "long-name": tmp_path / ("é" * 120),  # 240 bytes: no room for .NAME.book or temp names
        "file-as-dir": tmp_path / "plain",  # no suffix: a directory
        "proc": Path("/proc/book"),
    }[case]
    if case == "file-as-dir":
        out.write_text("a file")
    argv[argv.index("-o") + 1] = str(out)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert FakeExecutor.asked == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not os.path.exists("/proc/book")


def test_pyav_missing_is_refused_before_any_speech(tmp_path, monkeypatch):
    """Every book format is encoded by PyAV: without it the book stops at the checks, not after the speech."""
    from kokoro_tvm_ext.book.output import BookOutput
    from kokoro_tvm_ext.errors import MissingAssetError

    monkeypatch.setitem(sys.modules, "av", None)  # `import av` raises ImportError
    for target in ("book.m4b", "chapters"):
        with pytest.raises(MissingAssetError, match=r"audio needs PyAV \(FFmpeg's codecs\): pip install av$"):
            BookOutput(tmp_path / target).check()
    assert list(tmp_path.iterdir()) == []
