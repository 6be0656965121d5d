"""The HTTP API (FastAPI on uvicorn), compatible with Kokoro-FastAPI and OpenAI's speech endpoint.

Routes: ``POST /v1/audio/speech``, ``POST /dev/captioned_speech``, ``GET /v1/audio/voices``,
``GET /v1/models`` (+ ``/v1/models/{id}``), ``GET /health``. ``create_app`` takes a
loaded ``Speaker``: requests are planned by it (G2P, chunks, voices) and their chunks run
on its model, which only the scheduler's worker thread touches. Every request passes the
guard (``guard.py``: host check, body and in-flight limits, deadline, cancellation, request id).
"""

from __future__ import annotations

import warnings
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.serve import errors, web
from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.guard import GuardConfig, RequestGuard, context_of
from kokoro_tvm_ext.serve.plan import Limits, plan_speech
from kokoro_tvm_ext.serve.requests import MODELS, CaptionedSpeechRequest, SpeechRequest
from kokoro_tvm_ext.serve.responses import ChunkStream, audio_chunks, audio_whole, captioned_lines, captioned_whole
from kokoro_tvm_ext.serve.scheduler import Scheduler
from kokoro_tvm_ext.serve.voices import VoiceBook
from kokoro_tvm_ext.speech import UnknownPhonemeWarning
from kokoro_tvm_ext.speech.encoders import content_type

CREATED = 1735689600  # 2025-01-01, a fixed "created" for the model list
SPEECH_PATHS = frozenset({"/v1/audio/speech", "/dev/captioned_speech"})  # what the in-flight limits count
CHUNKS_AHEAD = 2  # a stream's chunks made and not yet taken by its response: one being sent, one ready


def create_app(
    speaker,
    *,
    voices: VoiceBook | None = None,
    limits: Limits | None = None,
    guard: GuardConfig | None = None,
    max_batch: int = 4,
) -> FastAPI:
    """``guard``: the request bounds; its default answers any ``Host`` (the caller knows where the app
    listens: ``kokoro-tvm serve`` allows its loopback names and bind address)."""
    limits = limits or Limits(max_tokens=speaker.max_tokens)
    voices = voices or VoiceBook()
    # Characters outside the vocab are dropped from the phonemes; per request that is noise in the log.
    warnings.filterwarnings("ignore", category=UnknownPhonemeWarning)
    scheduler = Scheduler(speaker, max_batch=max_batch, ahead=CHUNKS_AHEAD)
    sample_rate = speaker.sample_rate

    @asynccontextmanager
    async def lifespan(app):
        yield
        scheduler.stop()

    app = FastAPI(title="kokoro-tvm", lifespan=lifespan)
    app.state.scheduler = scheduler
    app.state.speaker = speaker
    errors.install(app)
    app.add_middleware(RequestGuard, config=guard or GuardConfig(), limited_paths=SPEECH_PATHS)

    async def start(req: SpeechRequest, request: Request) -> ChunkStream:
        """Plan the request in a worker thread (stopped by the guard's cancel event if its client leaves or
        its deadline passes), then put its chunks on the scheduler, cancelled when the request ends."""
        context = context_of(request)
        plan = await run_in_threadpool(
            plan_speech,
            speaker,
            req.input,
            req.voice,
            req.speed,
            req.lang_code,
            voices=voices,
            limits=limits,
            cancel=context.cancel,
        )
        stream = ChunkStream(scheduler, plan, on_audio=context.extend)
        context.on_close(stream.cancel)
        return stream

    def disposition(fmt: str) -> dict:
        return {"Content-Disposition": f"attachment; filename=speech.{fmt}"}

    @app.post("/v1/audio/speech")
    async def speech(req: SpeechRequest, request: Request):
        stream = await start(req, request)
        fmt = req.response_format
        if req.stream:
            return StreamingResponse(
                audio_chunks(stream, fmt, sample_rate), media_type=content_type(fmt), headers=disposition(fmt)
            )
        body = await audio_whole(stream, fmt, sample_rate)
        return Response(body, media_type=content_type(fmt), headers=disposition(fmt))

    @app.post("/dev/captioned_speech")
    async def captioned_speech(req: CaptionedSpeechRequest, request: Request):
        stream = await start(req, request)
        fmt = req.response_format
        if req.stream:
            return StreamingResponse(
                captioned_lines(stream, fmt, sample_rate, req.return_timestamps), media_type="application/x-ndjson"
            )
        return JSONResponse(await captioned_whole(stream, fmt, sample_rate, req.return_timestamps))

    @app.get("/v1/audio/voices")
    async def list_voices():
        return {"voices": voices.listing()}

    def model_entry(name: str) -> dict:
        return {"id": name, "object": "model", "created": CREATED, "owned_by": "kokoro"}

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_entry(m) for m in MODELS]}

    @app.get("/v1/models/{model}")
    async def get_model(model: str):
        if model not in MODELS:
            raise ApiError(
                404,
                f"model {model!r} not found; this server has {', '.join(MODELS)}",
                param="model",
                code="model_not_found",
            )
        return model_entry(model)

    @app.get("/health")
    async def health():
        stats = scheduler.snapshot()
        ok = scheduler.alive
        body = {"status": "healthy" if ok else "unavailable", "backend": speaker.model.name, "scheduler": stats}
        return JSONResponse(body, status_code=200 if ok else 503)

    web.install(app)
    return app
