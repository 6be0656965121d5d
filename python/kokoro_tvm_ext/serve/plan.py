"""A request's text -> its chunks and the model inputs for each (all input checks happen here).

Runs in a worker thread of the web app (G2P takes milliseconds to a second), before
anything reaches the scheduler, so bad input never costs model time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..assets import style_for, tokenize
from ..errors import InvalidInputError
from ..model_spec import MAX_TOKENS
from ..speech_chunks import Chunk, chunk_words
from .errors import ApiError
from .languages import speech_language, words
from .scheduler import Piece


@dataclass(frozen=True)
class Plan:
    chunks: list[Chunk]
    pieces: list[Piece]


@dataclass(frozen=True)
class Limits:
    max_input_chars: int = 10_000
    max_tokens: int = MAX_TOKENS
    first_chunk_tokens: int = 24  # about 1.5 s of speech; 0: the whole first clause


def _about(param: str, work):
    """``work()``; an input error it raises is about the request field ``param``
    (``serve/errors.py`` answers it with that field named)."""
    try:
        return work()
    except InvalidInputError as err:
        err.param = param
        raise


def plan_speech(
    text: str, voice: str, speed: float, lang_code: str | None, *, voices, vocab, limits: Limits, seed: int = 0
) -> Plan:
    if len(text) > limits.max_input_chars:
        raise ApiError(
            413,
            f"input is {len(text)} characters, this server takes at most "
            f"{limits.max_input_chars} per request (--max-input-chars); split the text",
            param="input",
            code="input_too_long",
        )
    names = _about("voice", lambda: voices.check(voice))
    lang = _about("lang_code", lambda: speech_language(names, lang_code))
    chunks = _about(
        "input",
        lambda: chunk_words(
            words(text, lang),
            vocab,
            max_tokens=limits.max_tokens,
            first_clause=True,
            first_chunk_tokens=limits.first_chunk_tokens,
        ),
    )
    if not chunks:
        raise ApiError(400, f"input has nothing to pronounce: {text[:40]!r}", param="input", code="invalid_value")
    pack = voices.pack(voice)
    pieces = []
    for i, chunk in enumerate(chunks):
        tokens = np.array(tokenize(chunk.phonemes, vocab), np.int64)
        pieces.append(Piece(tokens, style_for(pack, len(tokens)), float(speed), seed + i))
    return Plan(chunks, pieces)
