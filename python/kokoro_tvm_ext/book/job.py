"""The driver: which chapters are left, their units to an executor, finished chapters to the store,
and the book written once all are in (``make_book``).

``BookJob.prepare`` turns the checked options into the job: the model found (for Ray: on the
driver, opened by the workers), the resume key, the executor. An executor takes units and yields
each one's ``UnitAudio`` as it is done, in any order: ``LocalExecutor`` here (one process),
``ray_backend.RayExecutor`` (a cluster).
Results are keyed by (chapter, unit): a unit that comes back twice (a retried task)
counts once, and a chapter is assembled only when every one of its units is in.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from kokoro_tvm_ext.book.output import BookOutput, ChapterAudio
from kokoro_tvm_ext.book.plan import UNIT_CHARS, Unit, chapter_units, voiced_chapter
from kokoro_tvm_ext.book.ray_backend import RayExecutor
from kokoro_tvm_ext.book.render import Reading, UnitAudio, render_unit
from kokoro_tvm_ext.book.resume import ChapterStore, book_key
from kokoro_tvm_ext.book.sources import Book, Chapter
from kokoro_tvm_ext.speech import Speaker, SpeakerConfig, Speech, Voice
from kokoro_tvm_ext.speech.text_path import read_markup, span_voices
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


def check_markup(book: Book, reading: Reading | None = None) -> None:
    """Pause, voice and rate tags and inline pronunciations of every chapter, and the voices the tags (and
    ``--dialogue-voice``) name, before any is spoken (a unit with an error would otherwise be a silent one): the
    first bad one, named with its chapter."""
    lang = reading.voice.lang if reading and reading.voice.lang else "a"
    voices: set[str] = set()
    for number, chapter in enumerate(book.chapters, 1):
        if reading is not None:
            chapter = voiced_chapter(chapter, reading.dialogue_voice, reading.voice.spec)
        try:
            spans = read_markup(chapter.text, lang, aliases=reading.aliases if reading else None, voice_langs=False)
            for name in set(span_voices(spans)) - voices:
                Voice.load(name)
                voices.add(name)
        except InvalidInputError as err:
            raise InvalidInputError(f"chapter {number} ({chapter.title}): {err}") from None


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
    chapters = [voiced_chapter(c, reading.dialogue_voice, reading.voice.spec) for c in chapters]
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


@dataclass(frozen=True)
class BookJob:
    """A book's work once its options are checked: the model (resolved), how it is read, the unit size, the
    Ray cluster if any, and where finished chapters are kept."""

    config: SpeakerConfig
    reading: Reading
    unit_chars: int
    ray: str | None
    store: ChapterStore

    @classmethod
    def prepare(
        cls,
        config: SpeakerConfig,
        voice: Voice,
        output: BookOutput,
        *,
        speed: float = 1.0,
        seed: int = 0,
        unit_chars: int | None = None,
        ray: str | None = None,
        aliases: dict | None = None,
        dialogue_voice: str | None = None,
    ) -> BookJob:
        """``ray``: a Ray cluster's address (or ``auto``); None: this process. Finds (or compiles) the artifact."""
        if ray:
            # The driver only finds the artifact; each Ray worker opens it on config.threads (1 by default).
            config = replace(replace(config, threads=None).resolved(), threads=config.threads or 1)
        else:
            config = config.resolved()
        reading = Reading(voice, speed, seed, config.lexicon, aliases, dialogue_voice)
        unit_chars = unit_chars or UNIT_CHARS
        digest, _ = config.artifact_identity()
        return cls(config, reading, unit_chars, ray, ChapterStore(output.path, book_key(reading, unit_chars, digest)))

    def open_executor(self):
        """``(executor, sample rate)``: Ray's tasks (the rate from the artifact's metadata) or this process's
        Speaker."""
        if self.ray:
            return RayExecutor(self.ray, self.config), self.config.artifact_identity()[1]
        speaker = Speaker.open(self.config)
        return LocalExecutor(speaker), speaker.sample_rate

    def run(self, book: Book, output: BookOutput, *, quiet: bool = False):
        """``make_book`` for this job: (chapters with audio, files written, sample rate)."""
        return make_book(
            book, output, self.store, self.open_executor, self.reading, quiet=quiet, unit_chars=self.unit_chars
        )
