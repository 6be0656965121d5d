"""Kokoro-FastAPI's ``/dev/`` routes: ``POST /dev/captioned_speech`` (audio with word timings),
``POST /dev/phonemize`` (text -> phonemes and tokens), ``POST /dev/generate_from_phonemes`` and
``POST /dev/dialogue`` (turns in their voices)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.requests import (
    CaptionedSpeechRequest,
    DialogueRequest,
    PhonemeSpeechRequest,
    PhonemizeRequest,
)
from kokoro_tvm_ext.serve.responses import captioned_lines, captioned_whole
from kokoro_tvm_ext.serve.routes.audio import audio_response
from kokoro_tvm_ext.serve.routes.service import ServiceDep

router = APIRouter()


@router.post("/dev/captioned_speech")
async def captioned_speech(req: CaptionedSpeechRequest, service: ServiceDep):
    if req.stream_format != "audio":  # checked before any planning: a refused request costs no G2P
        raise ApiError(
            400,
            "stream_format: 'sse' is for /v1/audio/speech; /dev/captioned_speech streams JSON lines "
            "(set stream to false for one JSON object)",
            param="stream_format",
            code="invalid_value",
        )
    stream = await service.speak_text(req)
    fmt, rate = req.response_format, service.sample_rate
    if req.stream:
        return StreamingResponse(
            captioned_lines(stream, fmt, rate, req.return_timestamps), media_type="application/x-ndjson"
        )
    return JSONResponse(await captioned_whole(stream, fmt, rate, req.return_timestamps))


@router.post("/dev/phonemize")
async def phonemize_text(req: PhonemizeRequest, service: ServiceDep):
    return await service.phonemize(req)


@router.post("/dev/dialogue")
async def dialogue(req: DialogueRequest, service: ServiceDep):
    return await audio_response(await service.speak_dialogue(req), req, service.sample_rate)


@router.post("/dev/generate_from_phonemes")
async def generate_from_phonemes(req: PhonemeSpeechRequest, service: ServiceDep):
    return await audio_response(await service.speak_phonemes(req), req, service.sample_rate)
