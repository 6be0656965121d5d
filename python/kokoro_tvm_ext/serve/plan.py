"""A request's text (or phonemes) -> its speech plan (``Speaker.plan``), with every input error named by its
request field.

Runs in a worker thread of the web app (G2P takes milliseconds to a second), before anything reaches the
scheduler, so bad input never costs model time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS
from kokoro_tvm_ext.speech import FIRST_CHUNK_TOKENS, Voice, tokenize
from kokoro_tvm_ext.speech.markup import check_aliases, resolve_voice
from kokoro_tvm_ext.speech.speaker import scaled_speed
from kokoro_tvm_ext.support.errors import InvalidInputError


@dataclass(frozen=True)
class Limits:
    max_input_chars: int = MAX_INPUT_CHARS
    first_chunk_tokens: int = FIRST_CHUNK_TOKENS  # 0: the first clause, past 60 tokens; N > 0: at N tokens
    voice_tags: bool = True  # False: [voice:] and [rate:] read as text (`serve --no-voice-tags`)


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
    speaker,
    text: str,
    voice: str,
    speed: float,
    lang_code: str | None,
    *,
    voices,
    limits: Limits,
    cancel=None,
    aliases: dict | None = None,
    ssml: bool = False,
):
    """The request's ``SpeechPlan``, by the one chunking policy (``say``'s and Wyoming's too): one sentence per
    chunk, the first cut early so its audio comes soon. ``cancel``: a ``threading.Event`` that stops the
    planning (RequestCancelled) once set. ``aliases``: the request's ``voice_aliases`` (over the server's), for
    ``voice`` and voice tags; ``ssml``: the input is an SSML document (it is anyway when it starts with
    ``<speak``)."""
    _check_length(text, "input", limits)
    every = _about("voice_aliases", lambda: request_aliases(voices, aliases))
    named = voice.strip() if isinstance(voice, str) else voice
    spec = _about(
        "voice", lambda: voices.choose(resolve_voice(named, aliases)[0] if named in (aliases or {}) else voice)
    )
    chosen = _about("lang_code" if lang_code is not None else "voice", lambda: speaker.voice(spec, lang_code))
    if isinstance(named, str) and named in every and (rate := resolve_voice(named, every)[2]) is not None:
        speed = scaled_speed(speed, rate)  # the alias's pace, as where a tag names it
    return _about(
        "input",
        lambda: speaker.plan(
            text,
            chosen,
            lang=lang_code,
            speed=speed,
            first_chunk_tokens=limits.first_chunk_tokens,
            cancel=cancel,
            aliases=every,
            tags=limits.voice_tags,
            ssml=True if ssml else None,
        ),
    )


def dialogue_text(turns, pause: float) -> str:
    """Dialogue turns as one text of voice tags, a pause tag where the voice changes (turns of one voice in a row
    are one): what ``/dev/dialogue`` speaks, so it is the speech of the same tags sent to ``/v1/audio/speech``."""
    parts, last = [], None
    for turn in turns:
        if turn.voice != last:
            if last is not None and round(pause * 1000):
                parts.append(f"[pause:{round(pause * 1000)}ms]")
            parts.append(f"[voice:{turn.voice}]")
        parts.append(turn.text)
        last = turn.voice
    return " ".join(parts)


def request_aliases(voices, aliases: dict | None) -> dict:
    """The server's aliases with a request's ``voice_aliases`` over them, each of the request's checked (syntax,
    and its voices installed)."""
    if not aliases:
        return dict(voices.aliases)
    given = check_aliases(aliases, "voice_aliases")
    for name in given:
        spec = resolve_voice(name, given)[0]
        try:
            voices.choose(spec)
        except InvalidInputError as err:
            raise type(err)(f"voice_aliases: the alias {name!r}: {err}") from None
    return {**voices.aliases, **given}


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
