"""The driver: which chapters are left, their units to an executor, finished chapters to the store,
and the book written once all are in (``make_book``).

An executor takes units and yields each one's ``UnitAudio`` as it is done, in any
order: ``LocalExecutor`` here (one process), ``ray_backend.RayExecutor`` (a cluster).
Results are keyed by (chapter, unit): a unit that comes back twice (a retried task)
counts once, and a chapter is assembled only when every one of its units is in.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kokoro_tvm_ext.book.output import BookOutput, ChapterAudio
from kokoro_tvm_ext.book.plan import UNIT_CHARS, Unit, chapter_units
from kokoro_tvm_ext.book.render import Reading, UnitAudio, render_unit
from kokoro_tvm_ext.book.resume import ChapterStore
from kokoro_tvm_ext.book.sources import Book, Chapter
from kokoro_tvm_ext.speech import Speech
from kokoro_tvm_ext.support.cache import interrupts_deferred
from kokoro_tvm_ext.support.errors import InvalidInputError


class LocalExecutor:
    """Every unit in this process, on one Speaker."""

    def __init__(self, speaker):
        self.speaker = speaker

    def run(self, units: list[Unit], reading: Reading):
        for unit in units:
            yield render_unit(self.speaker, unit, reading)

    def close(self) -> None:
        pass


def _assemble(title: str, parts: list[UnitAudio], sample_rate: int) -> ChapterAudio:
    return ChapterAudio(title, Speech.concat([part.speech for part in parts], sample_rate))


def _progress(total_chars: int, done_chapters: int, chapters: int, quiet: bool):
    from tqdm import tqdm

    return tqdm(
        total=total_chars,
        unit="char",
        unit_scale=True,
        file=sys.stderr,
        disable=quiet,
        desc=f"book ({done_chapters}/{chapters} chapters kept)" if done_chapters else "book",
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} chars [{elapsed}<{remaining}]",
    )


def speak_book(
    chapters: list[Chapter],
    executor,
    reading: Reading,
    sample_rate: int,
    store: ChapterStore,
    *,
    quiet: bool = False,
    unit_chars: int = UNIT_CHARS,
) -> list[ChapterAudio]:
    """Every chapter's audio, reusing the ones ``store`` holds and saving each new one as soon as it is whole."""
    finished: dict[int, ChapterAudio] = {}
    units: list[Unit] = []
    expected: dict[int, int] = {}
    for i, chapter in enumerate(chapters):
        kept = store.load(i, chapter)
        if kept is not None:
            finished[i] = ChapterAudio(chapter.title, kept)
            continue
        mine = chapter_units(chapter, i, unit_chars)
        expected[i] = len(mine)
        units += mine
    chars = {u.key: u.chars for u in units}
    received: dict[int, dict[int, UnitAudio]] = {i: {} for i in expected}
    with _progress(sum(chars.values()), len(finished), len(chapters), quiet) as bar:
        for result in executor.run(units, reading):
            ch, index = result.key
            if ch not in received or index in received[ch]:
                continue  # a duplicate of a unit already in
            received[ch][index] = result
            bar.update(chars[result.key])
            if len(received[ch]) == expected[ch]:
                parts = [received[ch][k] for k in range(expected[ch])]
                audio = _assemble(chapters[ch].title, parts, sample_rate)
                store.save(ch, chapters[ch], audio.speech)
                finished[ch] = audio
                del received[ch]
    missing = sorted(set(range(len(chapters))) - set(finished))
    if missing:
        raise RuntimeError(f"book: the executor returned no audio for chapters {missing[:10]}")
    return [finished[i] for i in range(len(chapters))]


def make_book(
    book: Book,
    output: BookOutput,
    store: ChapterStore,
    open_executor,
    reading: Reading,
    *,
    quiet: bool = False,
    unit_chars: int = UNIT_CHARS,
) -> tuple[list[ChapterAudio], list[Path], int]:
    """The whole job once the input is checked (``output.check()``): hold the work directory, remove
    the temp files a killed run left, speak the chapters not kept (``open_executor()`` -> (executor,
    sample rate)), write every file of the book at once, then drop the work directory. Returns the
    chapters with audio, the files written and the sample rate. If it stops early (an error, Ctrl-C) no file of the
    book is written and the finished chapters stay kept for the next run."""
    with store.held(output.given):
        output.remove_leftovers()
        executor, sample_rate = open_executor()
        try:
            chapters = speak_book(
                book.chapters, executor, reading, sample_rate, store, quiet=quiet, unit_chars=unit_chars
            )
        finally:
            executor.close()
        spoken = [c for c in chapters if len(c.samples)]
        if not spoken:
            raise InvalidInputError(f"nothing to speak: no pronounceable text in {reading.voice.lang!r}")
        files = output.stage(spoken, sample_rate, title=book.title)  # the slow part: Ctrl-C removes it all
        with interrupts_deferred():  # renames: milliseconds, all or none
            written = files.commit()
            store.remove()  # the book is written: the kept chapters have done their job
    return spoken, written, sample_rate
