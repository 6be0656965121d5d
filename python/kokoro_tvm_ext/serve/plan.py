"""A request's text -> its speech plan (``Speaker.plan``), with every input error named by its request field.

Runs in a worker thread of the web app (G2P takes milliseconds to a second), before anything reaches the
scheduler, so bad input never costs model time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.serve.errors import ApiError


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
    speaker, text: str, voice: str, speed: float, lang_code: str | None, *, voices, limits: Limits, cancel=None
):
    """The request's ``SpeechPlan``: one sentence per chunk, the first cut early so its audio comes soon.
    ``cancel``: a ``threading.Event`` that stops the planning (RequestCancelled) once set."""
    if len(text) > limits.max_input_chars:
        raise ApiError(
            413,
            f"input is {len(text)} characters, this server takes at most "
            f"{limits.max_input_chars} per request (--max-input-chars); split the text",
            param="input",
            code="input_too_long",
        )
    _about("voice", lambda: voices.check(voice))
    chosen = _about("lang_code" if lang_code is not None else "voice", lambda: speaker.voice(voice, lang_code))
    return _about(
        "input",
        lambda: speaker.plan(
            text,
            chosen,
            speed=speed,
            pack_sentences=False,
            first_chunk_tokens=limits.first_chunk_tokens,
            cancel=cancel,
        ),
    )
