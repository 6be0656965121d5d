"""The HTTP API (FastAPI on uvicorn), compatible with Kokoro-FastAPI and OpenAI's speech endpoint.

Routes: ``POST /v1/audio/speech`` (audio, or OpenAI's server-sent events), ``POST /dev/captioned_speech``,
``POST /dev/phonemize``, ``POST /dev/generate_from_phonemes``, ``GET /v1/audio/voices`` (voices and their
aliases), ``GET /v1/models`` (+ ``/v1/models/{id}``), ``GET /health``, ``GET /metrics``, the page at ``/web``.
``create_app`` takes a loaded ``Speaker``: requests are planned by it (G2P, chunks, voices) and their chunks
run on its model, which only the scheduler's worker thread touches. Every request passes the guard
(``guard.py``: host check, API key, body and in-flight limits, deadline, cancellation, request id) and is
counted by route and status (``metrics.py``).
"""

from __future__ import annotations

import warnings
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.serve import errors, web
from kokoro_tvm_ext.serve.chunk_stream import ChunkStream
from kokoro_tvm_ext.serve.errors import ApiError
from kokoro_tvm_ext.serve.guard import GuardConfig, RequestGuard, context_of
from kokoro_tvm_ext.serve.metrics import HttpMetrics, Metrics
from kokoro_tvm_ext.serve.plan import Limits, phonemize, plan_phonemes, plan_speech
from kokoro_tvm_ext.serve.requests import (
    MODELS,
    AudioOptions,
    CaptionedSpeechRequest,
    PhonemeSpeechRequest,
    PhonemizeRequest,
    SpeechRequest,
)
from kokoro_tvm_ext.serve.responses import (
    audio_chunks,
    audio_events,
    audio_whole,
    captioned_lines,
    captioned_whole,
)
from kokoro_tvm_ext.serve.scheduler import Scheduler
from kokoro_tvm_ext.serve.voices import VoiceBook
from kokoro_tvm_ext.speech import UnknownPhonemeWarning
from kokoro_tvm_ext.speech.encoders import content_type

CREATED = 1735689600  # 2025-01-01, a fixed "created" for the model list
# What the in-flight limits count: the routes that take model or G2P time.
SPEECH_PATHS = frozenset({"/v1/audio/speech", "/dev/captioned_speech", "/dev/generate_from_phonemes", "/dev/phonemize"})
CHUNKS_AHEAD = 2  # a stream's chunks made and not yet taken by its response: one being sent, one ready


def create_app(
    speaker,
    *,
    voices: VoiceBook | None = None,
    limits: Limits | None = None,
    guard: GuardConfig | None = None,
    max_batch: int = 4,
) -> FastAPI:
    """``guard``: the request bounds and API keys; its default answers any ``Host`` without a key (the caller
    knows where the app listens: ``kokoro-tvm serve`` allows its loopback names and bind address)."""
    limits = limits or Limits(max_tokens=speaker.max_tokens)
    voices = voices or VoiceBook()
    # Characters outside the vocab are dropped from the phonemes; per request that is noise in the log.
    warnings.filterwarnings("ignore", category=UnknownPhonemeWarning)
    metrics = Metrics()
    scheduler = Scheduler(speaker, max_batch=max_batch, ahead=CHUNKS_AHEAD, observer=metrics)
    metrics.watch(scheduler)
    sample_rate = speaker.sample_rate

    @asynccontextmanager
    async def lifespan(app):
        yield
        scheduler.stop()

    app = FastAPI(title="kokoro-tvm", lifespan=lifespan)
    app.state.scheduler = scheduler
    app.state.speaker = speaker
    app.state.metrics = metrics
    errors.install(app)
    app.add_middleware(RequestGuard, config=guard or GuardConfig(), limited_paths=SPEECH_PATHS)
    app.add_middleware(HttpMetrics, metrics=metrics, router=app.router)  # outermost: counts the guard's answers

    async def start(plan_request, request: Request, options: AudioOptions) -> ChunkStream:
        """Plan the request in a worker thread (``plan_request(cancel)``, stopped by the guard's cancel event if
        its client leaves or its deadline passes), then put its chunks on the scheduler, cancelled when the
        request ends."""
        context = context_of(request)
        plan = await run_in_threadpool(plan_request, context.cancel)
        stream = ChunkStream(
            scheduler, plan, on_audio=context.extend, volume=options.volume_multiplier, since=context.arrived
        )
        context.on_close(stream.cancel)
        return stream

    def start_text(req: SpeechRequest, request: Request):
        def plan(cancel):
            return plan_speech(
                speaker, req.input, req.voice, req.speed, req.lang_code, voices=voices, limits=limits, cancel=cancel
            )

        return start(plan, request, req)

    def disposition(fmt: str) -> dict:
        return {"Content-Disposition": f"attachment; filename=speech.{fmt}"}

    async def audio_response(stream: ChunkStream, options: AudioOptions):
        fmt = options.response_format
        if options.stream:
            return StreamingResponse(
                audio_chunks(stream, fmt, sample_rate), media_type=content_type(fmt), headers=disposition(fmt)
            )
        body = await audio_whole(stream, fmt, sample_rate)
        return Response(body, media_type=content_type(fmt), headers=disposition(fmt))

    @app.post("/v1/audio/speech")
    async def speech(req: SpeechRequest, request: Request):
        stream = await start_text(req, request)
        if req.stream_format == "sse":
            return StreamingResponse(
                audio_events(stream, req.response_format, sample_rate),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return await audio_response(stream, req)

    @app.post("/dev/captioned_speech")
    async def captioned_speech(req: CaptionedSpeechRequest, request: Request):
        if req.stream_format != "audio":
            raise ApiError(
                400,
                "stream_format: 'sse' is for /v1/audio/speech; /dev/captioned_speech streams JSON lines "
                "(set stream to false for one JSON object)",
                param="stream_format",
                code="invalid_value",
            )
        stream = await start_text(req, request)
        fmt = req.response_format
        if req.stream:
            return StreamingResponse(
                captioned_lines(stream, fmt, sample_rate, req.return_timestamps), media_type="application/x-ndjson"
            )
        return JSONResponse(await captioned_whole(stream, fmt, sample_rate, req.return_timestamps))

    @app.post("/dev/phonemize")
    async def phonemize_text(req: PhonemizeRequest, request: Request):
        cancel = context_of(request).cancel
        return await run_in_threadpool(lambda: phonemize(speaker, req.text, req.language, limits=limits, cancel=cancel))

    @app.post("/dev/generate_from_phonemes")
    async def generate_from_phonemes(req: PhonemeSpeechRequest, request: Request):
        def plan(cancel):
            return plan_phonemes(
                speaker, req.phonemes, req.voice, req.speed, voices=voices, limits=limits, cancel=cancel
            )

        return await audio_response(await start(plan, request, req), req)

    @app.get("/v1/audio/voices")
    async def list_voices():
        return {"voices": voices.listing(), "aliases": voices.alias_listing()}

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

    @app.get("/metrics")
    async def prometheus_metrics(request: Request):
        body, kind = metrics.render(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": kind})

    web.install(app)
    return app
