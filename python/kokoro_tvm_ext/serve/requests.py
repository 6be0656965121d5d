"""The request bodies of the speech endpoints (Kokoro-FastAPI's and OpenAI's field names)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kokoro_tvm_ext.speech.assets.voices import DEFAULT_VOICE

MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
MIN_SPEED, MAX_SPEED = 0.25, 4.0
Format = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]


class SpeechRequest(BaseModel):
    """``POST /v1/audio/speech``. Unknown fields (OpenAI's ``instructions``, ...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str = "kokoro"
    input: str
    voice: str = DEFAULT_VOICE
    response_format: Format = "mp3"
    speed: float = Field(1.0, ge=MIN_SPEED, le=MAX_SPEED)
    stream: bool = True
    lang_code: str | None = None

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODELS:
            raise ValueError(f"unknown model {value!r}; use one of {', '.join(MODELS)}")
        return value

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input is empty: give the text to speak")
        return value


class CaptionedSpeechRequest(SpeechRequest):
    """``POST /dev/captioned_speech``: the same plus ``return_timestamps``."""

    return_timestamps: bool = True
