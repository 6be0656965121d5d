"""One unit of a book -> its 16-bit samples and word timings: the work every worker does.

The same function runs in the driver (one process) and in Ray workers, so both give
the same samples. A process loads the artifact once (``speaker``) and keeps it for
every unit it is given.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .plan import Unit, chunk_seed


@dataclass(frozen=True)
class Voice:
    """What decides the sound besides the text: shipped to every worker with each unit."""

    pack: np.ndarray  # [510, 1, 256] float32
    lang: str
    speed: float
    seed: int


@dataclass
class UnitAudio:
    key: tuple[int, int]  # (chapter, unit)
    samples: np.ndarray  # int16, 24 kHz mono
    # (word, start s, end s, space_after), from the unit's first sample
    timings: list[tuple[str, float, float, bool]]
    seconds: float = 0.0  # the time this unit took where it ran (for benchmarks)


_SPEAKERS: dict[tuple[str, int | None], object] = {}


def speaker(artifact: str | Path, threads: int | None = None):
    """This process's loaded artifact (loaded on first use, then kept)."""
    key = (str(artifact), threads)
    if key not in _SPEAKERS:
        from ..runtime import KokoroTVM

        _SPEAKERS[key] = KokoroTVM(artifact, num_threads=threads)
    return _SPEAKERS[key]


def render_unit(runtime, unit: Unit, voice: Voice, vocab: dict[str, int]) -> UnitAudio:
    """Speak a unit: G2P per paragraph (a paragraph always ends a chunk), chunks of whole
    words, one batched synthesis; chunk ``k`` gets ``chunk_seed(seed, chapter, unit, k)``."""
    from ..assets import LanguageMismatchWarning, UnknownPhonemeWarning, phonemize_words, style_for, tokenize
    from ..serve.encoders import to_int16
    from ..speech_chunks import chunk_words
    from ..timestamps import word_timings

    start = time.perf_counter()
    chunks = []
    with warnings.catch_warnings():
        # A "* * *" paragraph has no letters, and odd characters drop out of the phonemes:
        # per paragraph of a whole book that is noise, not news.
        warnings.simplefilter("ignore", LanguageMismatchWarning)
        warnings.simplefilter("ignore", UnknownPhonemeWarning)
        for para in unit.paragraphs:
            chunks += chunk_words(phonemize_words(para, voice.lang), vocab, max_tokens=runtime.max_tokens)
        if not chunks:
            return UnitAudio(unit.key, np.zeros(0, np.int16), [], time.perf_counter() - start)
        tokens = [np.array(tokenize(c.phonemes, vocab), np.int64) for c in chunks]
    styles = [style_for(voice.pack, len(t)) for t in tokens]
    seeds = [chunk_seed(voice.seed, unit.chapter, unit.index, k) for k in range(len(chunks))]
    pieces, timings, offset = [], [], 0.0
    results = runtime.iter_batch(tokens, styles, [voice.speed] * len(chunks), seeds)
    for chunk, (audio, durations) in zip(chunks, results):
        timings += [
            (t.word, t.start_time, t.end_time, t.space_after)
            for t in word_timings(chunk.words, durations, vocab, offset_seconds=offset, sample_rate=runtime.sample_rate)
        ]
        offset += len(audio) / runtime.sample_rate
        pieces.append(to_int16(audio))
    return UnitAudio(unit.key, np.concatenate(pieces), timings, time.perf_counter() - start)


def render_in_process(artifact: str, threads: int | None, unit: Unit, voice: Voice, vocab: dict[str, int]) -> UnitAudio:
    """``render_unit`` on this process's cached artifact (what a Ray task runs)."""
    return render_unit(speaker(artifact, threads), unit, voice, vocab)
