"""The request bodies of the speech endpoints (Kokoro-FastAPI's and OpenAI's field names)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
MIN_SPEED, MAX_SPEED = 0.25, 4.0
MAX_VOLUME = 10.0
Format = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]


def _not_blank(value: str, field: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{field} is empty: give the {what}")
    return value


class AudioOptions(BaseModel):
    """What every audio endpoint takes besides its text: the voice and how the audio comes back.
    Unknown fields (OpenAI's ``instructions``, ...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    voice: str = DEFAULT_VOICE
    response_format: Format = "mp3"
    speed: float = Field(1.0, ge=MIN_SPEED, le=MAX_SPEED)
    stream: bool = True
    # Kokoro-FastAPI's: the samples are scaled by it before encoding (then clipped to [-1, 1]).
    volume_multiplier: float = Field(1.0, gt=0.0, le=MAX_VOLUME)

    @field_validator("voice", mode="before")
    @classmethod
    def _voice_object(cls, value):
        """OpenAI's custom-voice object ``{"id": "..."}`` names a voice as its id."""
        if isinstance(value, dict) and set(value) == {"id"}:
            return value["id"]
        return value


class SpeechRequest(AudioOptions):
    """``POST /v1/audio/speech``. ``stream_format``: ``audio`` (the encoded bytes, streamed unless ``stream`` is
    false) or ``sse`` (OpenAI's server-sent events: ``speech.audio.delta`` with base64 audio, then
    ``speech.audio.done``)."""

    model: str = "kokoro"
    input: str
    lang_code: str | None = None
    stream_format: Literal["audio", "sse"] = "audio"
    # Kokoro-FastAPI's (docs/markup.md): names for voices (or {"voice", "rate"}) in ``voice`` and [voice:] tags;
    # SSML input; ``allow_voice_tags`` is accepted, tags are read unless the server turned them off.
    voice_aliases: dict[str, str | dict[str, str | float]] | None = None
    allow_voice_tags: bool | None = None
    ssml: bool = False

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"unknown model {value!r}; use one of {', '.join(MODELS)}")
        return value

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        return _not_blank(value, "input", "text to speak")


class CaptionedSpeechRequest(SpeechRequest):
    """``POST /dev/captioned_speech``: the same plus ``return_timestamps`` (its stream is JSON lines, not SSE)."""

    return_timestamps: bool = True


class DialogueTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    voice: str
    text: str

    @field_validator("voice")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if "[" in value or "]" in value:
            raise ValueError(f"voice {value!r} has a bracket: give a voice, a blend or an alias")
        return _not_blank(value, "voice", "voice of this turn")


class DialogueRequest(AudioOptions):
    """``POST /dev/dialogue`` (Kokoro-FastAPI's): turns, each in its voice, ``pause_between_turns`` seconds of
    silence where the voice changes (consecutive turns of one voice are one). The same speech as the turns
    written as ``[voice:]`` tags in one input."""

    turns: list[DialogueTurn] = Field(min_length=1, max_length=10_000)
    pause_between_turns: float = Field(0.3, ge=0.0, le=10.0)
    lang_code: str | None = None
    voice_aliases: dict[str, str | dict[str, str | float]] | None = None
    model: str = "kokoro"


class PhonemizeRequest(BaseModel):
    """``POST /dev/phonemize``: text -> the phonemes and token ids the model would get. ``language``: a code
    (``a``, ``b``, ``f``, ...) or a name such as ``fr`` or ``en-gb``."""

    model_config = ConfigDict(extra="ignore")

    text: str
    language: str = "a"

    @field_validator("text")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        return _not_blank(value, "text", "text to phonemize")

    @field_validator("language")
    @classmethod
    def _language_given(cls, value: str) -> str:
        return _not_blank(value, "language", "language code, such as a, b, f or en-gb").strip()


class PhonemeSpeechRequest(AudioOptions):
    """``POST /dev/generate_from_phonemes``: Kokoro phonemes (as ``/dev/phonemize`` gives them) -> audio.
    WAV unless ``response_format`` says otherwise, as Kokoro-FastAPI answers."""

    phonemes: str
    response_format: Format = "wav"

    @field_validator("phonemes")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        return _not_blank(value, "phonemes", "phonemes to speak (POST /dev/phonemize makes them from text)")
