"""OpenAI's speech API: ``POST /v1/audio/speech`` (audio, or OpenAI's server-sent events), ``GET /v1/audio/voices``
(the voices and their aliases), ``GET /v1/models`` and ``GET /v1/models/{model}``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.requests import MODELS, SpeechRequest
from kokoro_tvm_ext.serve.responses import audio_events
from kokoro_tvm_ext.serve.routes.audio import audio_response
from kokoro_tvm_ext.serve.routes.service import ServiceDep
from kokoro_tvm_ext.serve.routes.state import VoicesDep

CREATED = 1735689600  # 2025-01-01, a fixed "created" for the model list

router = APIRouter()


@router.post("/v1/audio/speech")
async def speech(req: SpeechRequest, service: ServiceDep):
    stream = await service.speak_text(req)
    if req.stream_format == "sse":
        return StreamingResponse(
            audio_events(stream, req.response_format, service.sample_rate),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    return await audio_response(stream, req, service.sample_rate)


@router.get("/v1/audio/voices")
async def list_voices(voices: VoicesDep):
    return {"voices": voices.listing(), "aliases": voices.alias_listing()}


def _model_entry(name: str) -> dict:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "kokoro"}


@router.get("/v1/models")
async def list_models():
    return {"object": "list", "data": [_model_entry(m) for m in MODELS]}


@router.get("/v1/models/{model}")
async def get_model(model: str):
    if model not in MODELS:
        raise ApiError(
            404,
            f"model {model!r} not found; this server has {', '.join(MODELS)}",
            param="model",
            code="model_not_found",
        )
    return _model_entry(model)
