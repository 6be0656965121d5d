"""The benchmarks' model inputs, planned by the pipeline every front end uses (``Speaker.plan``): the same G2P,
tokens and style rows as ``say`` and ``serve``, never a second copy of them here.

A benchmark times one synthesis call of a fixed token count (48 and 309 tokens for the bench texts; the peer rows
get the same tokens in one call), while a plan cuts a text where every front end does: one sentence per chunk,
the first chunk short. ``as_one_call`` puts a plan's chunks back together into that one call.
"""

from __future__ import annotations

import types

import numpy as np

from kokoro_tvm_ext.model.spec import MAX_TOKENS, SAMPLE_RATE


def planner(vocab: dict[str, int] | None = None):
    """A ``Speaker`` that only plans (G2P, chunking, tokens, style rows): a driver writes its inputs before
    any model is loaded, and a planning benchmark times no model."""
    from kokoro_tvm_ext.speech import Speaker

    return Speaker(types.SimpleNamespace(sample_rate=SAMPLE_RATE, max_tokens=MAX_TOKENS), vocab=vocab)


def as_one_call(plan):
    """A ``SpeechPlan``'s spoken chunks as one ``PlannedChunk``: their tokens joined by the space token (as their
    phonemes joined by spaces read), the style row the pipeline gives a chunk of that many tokens, the first
    chunk's speed and seed. ValueError if they do not fit one call of the model."""
    from kokoro_tvm_ext.speech import PlannedChunk, style_for

    spoken = [chunk for chunk in plan.chunks if not chunk.is_pause]
    if not spoken:
        raise ValueError("the plan has nothing to speak")
    space = np.array([plan.vocab[" "]], np.int64)
    tokens = np.concatenate([part for chunk in spoken for part in (space, chunk.tokens)][1:])
    if tokens.size > MAX_TOKENS:
        raise ValueError(f"benchmark text has {tokens.size} tokens; keep it within {MAX_TOKENS}")
    phonemes = " ".join(chunk.phonemes for chunk in spoken)
    # style_for is the rule Speaker.plan applies to every chunk (KPipeline's pack[tokens - 1]); no chunk of
    # the plan has this call's length to take the row from.
    style = style_for(plan.voice.pack, tokens.size)
    return PlannedChunk(phonemes, tokens, style, spoken[0].speed, spoken[0].seed)


def one_call(text: str, voice, vocab: dict[str, int] | None = None):
    """``text`` in ``voice`` (a name or a ``Voice``) as one call (``as_one_call`` of its plan), noise seed 0."""
    return as_one_call(planner(vocab).plan(text, voice))


def spoken_phonemes(text: str, voice, vocab: dict[str, int] | None = None) -> str:
    """The phonemes of ``text``'s plan in ``voice``, its chunks joined by spaces."""
    return " ".join(chunk.phonemes for chunk in planner(vocab).plan(text, voice).chunks if not chunk.is_pause)
