"""Finished chapters -> the book on disk: one ``.m4b``/``.mp3`` with chapter markers, or a
directory of per-chapter files; optional per-chapter ``.srt``. Every file is written to a
temp name first and all are renamed together at the end (``support.cache.AtomicFiles``), so
an interrupted or failed write leaves no file of the book, partial or whole.

Audio goes through the speech layer's one writer (``speech.audio``: FFmpeg via PyAV): AAC in an
MPEG-4 audiobook (chapters as a QuickTime chapter track and Nero ``chpl``), MP3 with ID3v2 ``CHAP``
frames.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.book.paths import ROOM, TEMP_TAG, chapter_stems, name_max, remove_leftovers
from kokoro_tvm_ext.speech import Speech
from kokoro_tvm_ext.speech.audio import FORMATS, SUFFIXES, Chapter, check_format, write_audio
from kokoro_tvm_ext.speech.subtitles import render
from kokoro_tvm_ext.support.cache import AtomicFiles, check_writable_dir, check_writable_file
from kokoro_tvm_ext.support.errors import InvalidInputError, UnwritablePathError

# A single file holds the chapters as markers: the suffixes of the formats that carry them (.mp3, .m4a, .m4b).
BOOK_SUFFIXES = tuple(suffix for suffix, fmt in SUFFIXES.items() if FORMATS[fmt].chapters)
# per-chapter files in a directory
CHAPTER_FORMATS = ("wav", "flac", "mp3", "m4a")


@dataclass
class ChapterAudio:
    title: str
    speech: Speech  # 16-bit samples, word timings from the chapter's start

    @property
    def samples(self) -> np.ndarray:
        return self.speech.audio


def output_kind(output: str | Path) -> str:
    """``"file"`` for a name in ``BOOK_SUFFIXES``, ``"dir"`` for an existing directory or a name without a suffix."""
    path = Path(output)
    if path.is_dir() or str(output).endswith(os.sep) or not path.suffix:
        return "dir"
    if path.suffix.lower() in BOOK_SUFFIXES:
        return "file"
    raise InvalidInputError(
        f"-o {output}: unknown output type {path.suffix!r}; give a {', '.join(BOOK_SUFFIXES)} file "
        "or a directory (one file per chapter)"
    )


class BookOutput:
    """Where a book goes: ``check`` before any speech, ``remove_leftovers`` of a killed run, then
    ``stage`` every file under a temp name and ``commit`` them all at once."""

    def __init__(self, output: str | Path, chapter_format: str = "wav", subtitles: bool = False):
        self.given = str(output)
        self.kind = output_kind(output)
        self.path = Path(output).expanduser().absolute()
        if self.kind == "dir" and chapter_format not in CHAPTER_FORMATS:
            raise InvalidInputError(f"--format must be one of {', '.join(CHAPTER_FORMATS)}, got {chapter_format!r}")
        self.chapter_format = chapter_format
        self.subtitles = subtitles

    @property
    def audio_format(self) -> str:
        """The format of the book's file, or of each chapter's."""
        return SUFFIXES[self.path.suffix.lower()] if self.kind == "file" else self.chapter_format

    @property
    def directory(self) -> Path:
        """Where the files go: the output directory, or the file's."""
        return self.path if self.kind == "dir" else self.path.parent

    def check(self) -> None:
        """Fail early, before any speech, if the output cannot be written: a missing or unwritable
        directory, a file where a directory goes, a name too long for the filesystem, PyAV missing
        (it encodes every format: the chapters carry their titles)."""
        check_format(self.audio_format, titled=True)
        parent = self.path.parent  # also holds the work directory (.NAME.book/)
        if not parent.is_dir():
            raise UnwritablePathError(f"cannot write {self.given}: directory {parent} does not exist")
        if self.kind == "file":
            check_writable_file(self.path)
        elif self.path.exists() and not self.path.is_dir():
            raise UnwritablePathError(f"cannot write {self.given}: it exists and is not a directory")
        limit = name_max(parent)
        size = len(os.fsencode(self.path.name))
        if size + ROOM > limit:
            raise UnwritablePathError(
                f"cannot write {self.given}: its name is {size} bytes; this filesystem allows {limit} per name "
                f"and {ROOM} are needed beside it for suffixes and temp names: give a shorter name"
            )
        check_writable_dir(parent, self.given)
        if self.kind == "dir":
            # a temp file with the longest name a chapter's file gets, where it will be (a directory
            # not made yet will be made in the parent: the same filesystem), so that a filesystem
            # allowing less than it says fails now, not after the speech
            where = self.path if self.path.is_dir() else parent
            if name_max(where) - ROOM < 16:
                raise UnwritablePathError(
                    f"cannot write {self.given}: its filesystem allows only {name_max(where)} bytes per file name"
                )
            longest = "." + "x" * (name_max(where) - ROOM) + ".flac." + TEMP_TAG
            check_writable_dir(where, self.given, prefix=longest)

    def chapter_names(self, titles: list[str]) -> list[Path]:
        """Each chapter's path without its suffix: ``DIR/01 Title`` or ``NAME.01`` (subtitles beside a single file)."""
        if self.kind == "file":
            width = max(2, len(str(len(titles))))
            return [self.path.parent / f"{self.path.stem}.{i:0{width}d}" for i in range(1, len(titles) + 1)]
        # a directory not made yet will be made in the parent: the same filesystem
        limit = name_max(self.path if self.path.is_dir() else self.path.parent) - ROOM
        return [self.path / stem for stem in chapter_stems(titles, limit)]

    def remove_leftovers(self) -> list[Path]:
        """The temp files a killed run left where this output goes (only ours: named after this
        output's files, see ``paths.is_leftover``); the ones removed."""
        if self.kind == "dir":
            return remove_leftovers(self.path)
        name, stem = re.escape(self.path.name), re.escape(self.path.stem)
        return remove_leftovers(self.directory, re.compile(rf"{name}|{stem}\.\d+\.srt"))

    def stage(self, chapters: list[ChapterAudio], sample_rate: int, *, title: str) -> AtomicFiles:
        """Every file encoded under its temp name, ready to ``commit``; on an error or Ctrl-C the
        temp files are removed."""
        files = AtomicFiles(tag=TEMP_TAG)
        made = False
        try:
            names = self.chapter_names([c.title for c in chapters])
            if self.kind == "file":
                marks, start = [], 0
                for ch in chapters:
                    marks.append(Chapter(ch.title, start, start + len(ch.samples)))
                    start += len(ch.samples)
                pieces = (c.samples for c in chapters)
                write_audio(self.path, pieces, sample_rate, self.audio_format, files=files, title=title, chapters=marks)
            else:
                made = not self.path.is_dir()
                self.path.mkdir(exist_ok=True)
                for name, ch in zip(names, chapters):
                    path = name.with_name(f"{name.name}.{self.chapter_format}")
                    write_audio(path, [ch.samples], sample_rate, self.chapter_format, files=files, title=ch.title)
            if self.subtitles:
                for name, ch in zip(names, chapters):
                    with files.open(name.with_name(f"{name.name}.srt")) as f:
                        f.write(srt_bytes(ch.speech.words))
        except BaseException:
            files.discard()
            if made:
                with contextlib.suppress(OSError):
                    self.path.rmdir()  # the directory this call made, empty again
            raise
        return files


def srt_bytes(words) -> bytes:
    """A chapter's word timings as an .srt file."""

    return render(words, ".srt").encode()


def write_book(
    output: str | Path,
    chapters: list[ChapterAudio],
    sample_rate: int,
    *,
    title: str,
    chapter_format: str = "wav",
    subtitles: bool = False,
) -> list[Path]:
    """Write the book, every file or none; returns the files written."""
    return BookOutput(output, chapter_format, subtitles).stage(chapters, sample_rate, title=title).commit()
