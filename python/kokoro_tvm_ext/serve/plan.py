"""A request's text (or phonemes) -> its speech plan (``Speaker.plan``), with every input error named by its
request field.

Runs in a worker thread of the web app (G2P takes milliseconds to a second), before anything reaches the
scheduler, so bad input never costs model time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS
from kokoro_tvm_ext.speech import FIRST_CHUNK_TOKENS, MAX_TOKENS, Voice, tokenize
from kokoro_tvm_ext.support.errors import InvalidInputError


@dataclass(frozen=True)
class Limits:
    max_input_chars: int = MAX_INPUT_CHARS
    max_tokens: int = MAX_TOKENS
    first_chunk_tokens: int = FIRST_CHUNK_TOKENS  # 0: the first clause, past 60 tokens; N > 0: at N tokens


def _about(param: str, work):
    """``work()``; an input error it raises is about the request field ``param``
    (``serve/errors.py`` answers it with that field named)."""
    try:
        return work()
    except InvalidInputError as err:
        err.param = param
        raise


def _check_length(text: str, param: str, limits: Limits) -> None:
    if len(text) > limits.max_input_chars:
        raise ApiError(
            413,
            f"{param} is {len(text)} characters, this server takes at most "
            f"{limits.max_input_chars} per request (--max-input-chars); split the text",
            param=param,
            code="input_too_long",
        )


def plan_speech(
    speaker, text: str, voice: str, speed: float, lang_code: str | None, *, voices, limits: Limits, cancel=None
):
    """The request's ``SpeechPlan``, by the one chunking policy (``say``'s and Wyoming's too): one sentence per
    chunk, the first cut early so its audio comes soon. ``cancel``: a ``threading.Event`` that stops the
    planning (RequestCancelled) once set."""
    _check_length(text, "input", limits)
    spec = _about("voice", lambda: voices.choose(voice))
    chosen = _about("lang_code" if lang_code is not None else "voice", lambda: speaker.voice(spec, lang_code))
    return _about(
        "input",
        lambda: speaker.plan(
            text,
            chosen,
            speed=speed,
            first_chunk_tokens=limits.first_chunk_tokens,
            cancel=cancel,
        ),
    )


def plan_phonemes(speaker, phonemes: str, voice: str, speed: float, *, voices, limits: Limits, cancel=None):
    """The plan of Kokoro phonemes as given, by the same policy as text (a chunk per sentence, the first cut
    early)."""
    _check_length(phonemes, "phonemes", limits)
    spec = _about("voice", lambda: voices.choose(voice))
    chosen = _about("voice", lambda: speaker.voice(spec))
    return _about(
        "phonemes",
        lambda: speaker.plan(
            phonemes=phonemes, voice=chosen, speed=speed, first_chunk_tokens=limits.first_chunk_tokens, cancel=cancel
        ),
    )


def phonemize(speaker, text: str, language: str, *, limits: Limits, cancel=None) -> dict:
    """``{"phonemes", "tokens"}`` of ``text`` read in ``language``: what ``Speaker.plan`` gives the model, its
    chunks (whole sentences: no first chunk cut) joined by a space, as ``speech.phonemize`` joins sentences. No
    voice pack is needed: a silent style stands in for one."""
    _check_length(text, "text", limits)
    reader = _about("language", lambda: Voice.silent("phonemize", language))
    plan = _about("text", lambda: speaker.plan(text, reader, first_chunk_tokens=None, cancel=cancel))
    phonemes = " ".join(chunk.phonemes for chunk in plan.chunks)
    return {"phonemes": phonemes, "tokens": [int(t) for t in tokenize(phonemes, speaker.vocab)]}
