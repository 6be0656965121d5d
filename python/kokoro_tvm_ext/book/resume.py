"""Finished chapters kept on disk, so an interrupted book resumes where it stopped.

The store is a work directory next to the output (``.NAME.book/``). Each finished
chapter is one ``.npz`` (16-bit samples, their rate and word timings) whose name holds a hash of
the settings and the chapter's title and text: a rerun with the same input and
settings finds it, a changed chapter or setting does not. Files are written to a
temp name and renamed, so a chapter interrupted half-way never looks finished.

What is kept there becomes the book, so the work directory is created 0700 and refused when
another user owns it or may write it (a chapter of theirs would be read as ours), or when it is
a symbolic link.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import astuple
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.book.render import Reading
from kokoro_tvm_ext.book.sources import Chapter
from kokoro_tvm_ext.speech import Speech
from kokoro_tvm_ext.speech.timestamps import WordTiming
from kokoro_tvm_ext.support.cache import atomic_write, stat_problem
from kokoro_tvm_ext.support.errors import UnwritablePathError

FORMAT = 2  # bump when the stored layout or how units are cut changes


def settings_key(**settings) -> str:
    """A hash of everything besides the text that decides the audio (JSON-able values)."""
    blob = json.dumps({"format": FORMAT, **settings}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def book_key(reading: Reading, unit_chars: int, artifact: str) -> str:
    """The settings key of a book read by ``reading`` in units of ``unit_chars``, on the artifact whose metadata
    has the sha256 ``artifact`` (``SpeakerConfig.artifact_identity``)."""
    return settings_key(
        voice=hashlib.sha256(reading.voice.pack.tobytes()).hexdigest(),
        lang=reading.voice.lang,
        speed=reading.speed,
        seed=reading.seed,
        unit_chars=unit_chars,
        **({"lexicon": reading.lexicon.digest} if reading.lexicon else {}),  # without one, the key is as before
        **({"aliases": sorted((k, repr(v)) for k, v in reading.aliases.items())} if reading.aliases else {}),
        **({"dialogue_voice": reading.dialogue_voice} if reading.dialogue_voice else {}),
        artifact=artifact,
    )


def work_dir(output: Path) -> Path:
    output = Path(output)
    return output.parent / f".{output.name}.book"


class ChapterStore:
    def __init__(self, output: Path, settings: str):
        self.dir = work_dir(output)
        self.settings = settings

    def path(self, index: int, chapter: Chapter) -> Path:
        digest = hashlib.sha256(f"{self.settings}\0{chapter.title}\0{chapter.text}".encode()).hexdigest()[:20]
        return self.dir / f"{index:04d}-{digest}.npz"

    def load(self, index: int, chapter: Chapter) -> Speech | None:
        """The speech of a finished chapter (16-bit samples, word timings), or None."""
        path = self.path(index, chapter)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                words = [WordTiming(*fields) for fields in json.loads(bytes(z["words"]).decode())]
                return Speech(z["samples"], int(z["sample_rate"]), words)
        except (OSError, ValueError, KeyError, TypeError):  # damaged: speak it again
            return None

    def save(self, index: int, chapter: Chapter, speech: Speech) -> None:
        words = [astuple(w) for w in speech.words]
        with atomic_write(self.path(index, chapter)) as f:
            np.savez(
                f,
                samples=np.asarray(speech.audio, np.int16),
                sample_rate=np.int64(speech.sample_rate),
                words=np.frombuffer(json.dumps(words).encode(), np.uint8),
            )

    def kept(self, chapters: list[Chapter]) -> int:
        """How many of ``chapters`` are finished here."""
        return sum(self.path(i, c).is_file() for i, c in enumerate(chapters))

    @contextlib.contextmanager
    def held(self, output: str):
        """The work directory, made and locked for this run (``output`` names it in the message
        when another run holds it). Temp files left in it by a killed run are removed first; an
        empty work directory is removed at the end."""
        fd = self._open_private(output)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when fd closes, or the process dies
            except BlockingIOError:
                raise UnwritablePathError(
                    f"cannot write {output}: another kokoro-tvm book is writing it (it holds {self.dir}); "
                    "wait for it to finish"
                ) from None
            for leftover in self.dir.glob(".*.tmp"):  # everything in here is ours
                leftover.unlink(missing_ok=True)
            try:
                yield self
            finally:
                with contextlib.suppress(OSError):
                    self.dir.rmdir()  # only if no chapter is kept in it
        finally:
            os.close(fd)

    def _open_private(self, output: str) -> int:
        """The work directory, made 0700 if missing, opened (not through a link) and checked on what was opened."""
        with contextlib.suppress(FileExistsError):
            self.dir.mkdir(mode=0o700, parents=True)
        try:
            fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as err:  # ELOOP: a symbolic link; ENOTDIR: a file
            raise UnwritablePathError(
                f"cannot write {output}: its work directory {self.dir} is not a directory of its own "
                f"({err.strerror}); remove it"
            ) from None
        problem = stat_problem(self.dir, os.fstat(fd))
        if problem:
            os.close(fd)
            raise UnwritablePathError(
                f"cannot write {output}: its work directory {problem} (or remove it: it holds only finished chapters)"
            )
        return fd

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
