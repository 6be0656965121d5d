"""One unit of a book -> its 16-bit samples and word timings: the work every worker does.

The same function runs in the driver (one process) and in Ray workers, so both give
the same samples. A process loads its Speaker once (``speaker``) and keeps it for
every unit it is given.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.book.plan import Unit, chunk_seed
from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech import Voice
from kokoro_tvm_ext.speech.lexicon import Lexicon


@dataclass(frozen=True)
class Reading:
    """What decides the sound besides the text: shipped to every worker with each unit."""

    voice: Voice  # its pack and language
    speed: float
    seed: int
    lexicon: Lexicon | None = None  # the user's pronunciations (--lexicon)


@dataclass
class UnitAudio:
    key: tuple[int, int]  # (chapter, unit)
    samples: np.ndarray  # int16, 24 kHz mono
    # (word, start s, end s, space_after), from the unit's first sample
    timings: list[tuple[str, float, float, bool]]
    seconds: float = 0.0  # the time this unit took where it ran (for benchmarks)


_SPEAKERS: dict[tuple[str, int | None], object] = {}


def speaker(artifact: str | Path, threads: int | None = None):
    """This process's Speaker on the artifact (loaded on first use, then kept)."""
    key = (str(artifact), threads)
    if key not in _SPEAKERS:
        from kokoro_tvm_ext.speech import Speaker

        _SPEAKERS[key] = Speaker.load(artifact, threads=threads)
    return _SPEAKERS[key]


def render_unit(speaker, unit: Unit, reading: Reading) -> UnitAudio:
    """Speak a unit (its paragraphs, one sentence per chunk, batched); chunk ``k`` gets
    ``chunk_seed(seed, chapter, unit, k)``, so any worker gives the same samples."""
    from kokoro_tvm_ext.speech import LanguageMismatchWarning, UnknownPhonemeWarning, join
    from kokoro_tvm_ext.speech.encoders import to_int16

    start = time.perf_counter()
    with warnings.catch_warnings():
        # A "* * *" paragraph has no letters, and odd characters drop out of the phonemes:
        # per paragraph of a whole book that is noise, not news.
        warnings.simplefilter("ignore", LanguageMismatchWarning)
        warnings.simplefilter("ignore", UnknownPhonemeWarning)
        try:
            plan = speaker.plan(
                "\n\n".join(unit.paragraphs),
                reading.voice,
                speed=reading.speed,
                chunk_seeds=lambda k: chunk_seed(reading.seed, unit.chapter, unit.index, k),
                pack_sentences=False,
                lexicon=reading.lexicon,
            )
        except InvalidInputError:  # nothing pronounceable in this unit (a "* * *" paragraph)
            return UnitAudio(unit.key, np.zeros(0, np.int16), [], time.perf_counter() - start)
    speech = join(list(speaker.run(plan)), speaker.sample_rate)
    timings = [(t.word, t.start_time, t.end_time, t.space_after) for t in speech.words]
    return UnitAudio(unit.key, to_int16(speech.audio), timings, time.perf_counter() - start)


def render_in_process(artifact: str, threads: int | None, unit: Unit, reading: Reading) -> UnitAudio:
    """``render_unit`` on this process's Speaker (what a Ray task runs)."""
    return render_unit(speaker(artifact, threads), unit, reading)
