"""One unit of a book -> its speech (16-bit samples and word timings): the work every worker does.

The same function runs in the driver (one process) and in Ray workers, so both give
the same samples. A process loads its Speaker once (``speaker``) and keeps it for
every unit it is given.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np

from kokoro_tvm_ext.book.plan import Unit, chunk_seed
from kokoro_tvm_ext.speech import (
    FIRST_CHUNK_TOKENS,
    LanguageMismatchWarning,
    Speaker,
    Speech,
    UnknownPhonemeWarning,
    Voice,
    join,
)
from kokoro_tvm_ext.speech.audio import to_int16
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.speech.lexicon import Lexicon
from kokoro_tvm_ext.support.errors import InvalidInputError


@dataclass(frozen=True)
class Reading:
    """What decides the sound besides the text: shipped to every worker with each unit."""

    voice: Voice  # its pack and language
    speed: float
    seed: int
    lexicon: Lexicon | None = None  # the user's pronunciations (--lexicon)
    aliases: dict | None = None  # names for voices in [voice:] tags (--cast, --voice-alias)
    dialogue_voice: str | None = None  # quoted speech in this voice (--dialogue-voice)


@dataclass
class UnitAudio:
    key: tuple[int, int]  # (chapter, unit)
    speech: Speech  # 16-bit samples (half the bytes to ship from a worker) and word timings from its start
    seconds: float = 0.0  # the time this unit took where it ran (for benchmarks)


_SPEAKERS: dict[tuple, object] = {}


def speaker(config: SpeakerConfig):
    """This process's Speaker for ``config`` (opened on first use, then kept). The book reads with
    ``Reading.lexicon``, so the config's own lexicon, if any, is not part of what is kept."""
    key = (str(config.artifact), str(config.weights), config.precision, repr(config.target), config.threads)
    if key not in _SPEAKERS:
        _SPEAKERS[key] = Speaker.open(replace(config, lexicon=None), quiet=True)
    return _SPEAKERS[key]


def render_unit(speaker, unit: Unit, reading: Reading) -> UnitAudio:
    """Speak a unit (its paragraphs, one sentence per chunk, batched); chunk ``k`` gets
    ``chunk_seed(seed, chapter, unit, k)``, so any worker gives the same samples."""

    start = time.perf_counter()
    with warnings.catch_warnings():
        # A "* * *" paragraph has no letters, and odd characters drop out of the phonemes:
        # per paragraph of a whole book that is noise, not news.
        warnings.simplefilter("ignore", LanguageMismatchWarning)
        warnings.simplefilter("ignore", UnknownPhonemeWarning)
        try:
            plan = speaker.plan(
                unit.text,
                reading.voice,
                lang=reading.voice.lang,  # every voice reads the book's language
                aliases=reading.aliases,
                speed=reading.speed,
                chunk_seeds=lambda k: chunk_seed(reading.seed, unit.chapter, unit.index, k),
                first_chunk_tokens=FIRST_CHUNK_TOKENS if unit.index == 0 else None,  # a chapter is one speech
                lexicon=reading.lexicon,
            )
        except InvalidInputError:  # nothing pronounceable in this unit (a "* * *" paragraph)
            silence = Speech(np.zeros(0, np.int16), speaker.sample_rate, [])
            return UnitAudio(unit.key, silence, time.perf_counter() - start)
    speech = join(list(speaker.run(plan)), speaker.sample_rate)
    return UnitAudio(unit.key, replace(speech, audio=to_int16(speech.audio)), time.perf_counter() - start)


def render_in_process(config: SpeakerConfig, unit: Unit, reading: Reading) -> UnitAudio:
    """``render_unit`` on this process's Speaker for ``config`` (what a Ray task runs)."""
    return render_unit(speaker(config), unit, reading)
