"""The HTTP API (FastAPI on uvicorn), compatible with Kokoro-FastAPI and OpenAI's speech endpoint.

``create_app`` takes a loaded ``Speaker`` and builds the app: its state (the speaker, the scheduler whose worker
thread alone runs the model, the voices, the limits, the metrics), the middleware, the routers of ``routes/``
(OpenAI's ``/v1/...``, Kokoro-FastAPI's ``/dev/...``, ``/health`` and ``/metrics``) and the page at ``/web``.
Requests are planned by the speaker (G2P, chunks, voices) and their chunks run on its model. Every request passes
the guard (``guard.py``: host check, API key, body and in-flight limits, deadline, cancellation, request id) and is
counted by route and status (``metrics.py``).
"""

from __future__ import annotations

import warnings
from contextlib import asynccontextmanager

from fastapi import FastAPI

from kokoro_tvm_ext.serve import errors, web
from kokoro_tvm_ext.serve.guard import GuardConfig, RequestGuard
from kokoro_tvm_ext.serve.metrics import HttpMetrics, Metrics
from kokoro_tvm_ext.serve.plan import Limits
from kokoro_tvm_ext.serve.routes import dev, openai, ops
from kokoro_tvm_ext.serve.routes.state import set_state
from kokoro_tvm_ext.serve.scheduler import CHUNKS_AHEAD, MAX_BATCH, Scheduler
from kokoro_tvm_ext.serve.voices import VoiceBook
from kokoro_tvm_ext.support.errors import InputWarning

ROUTERS = (openai.router, dev.router, ops.router)
# What the in-flight limits count: the routes that take model or G2P time, which are the POST routes (the GETs
# are listings, /health and /metrics, and stay free).
SPEECH_PATHS = frozenset(route.path for router in ROUTERS for route in router.routes if "POST" in route.methods)


def create_app(
    speaker,
    *,
    voices: VoiceBook | None = None,
    limits: Limits | None = None,
    guard: GuardConfig | None = None,
    max_batch: int = MAX_BATCH,
    docs: bool = False,
) -> FastAPI:
    """``guard``: the request bounds and API keys; its default answers any ``Host`` without a key (the caller
    knows where the app listens: ``kokoro-tvm serve`` allows its loopback names and bind address). ``docs``:
    serve FastAPI's ``/docs``, ``/redoc`` and ``/openapi.json`` (off by default: the first two load scripts
    from a CDN into the origin of ``/web``, whose page keeps the API key in ``sessionStorage``)."""
    # A request's text in another language, characters Kokoro has no token for, SSML's pitch: the client's to
    # know, and one line per request is noise in the operator's log.
    warnings.filterwarnings("ignore", category=InputWarning)
    metrics = Metrics()
    scheduler = Scheduler(speaker, max_batch=max_batch, ahead=CHUNKS_AHEAD, observer=metrics)
    metrics.watch(scheduler)

    @asynccontextmanager
    async def lifespan(app):
        yield
        scheduler.stop()

    app = FastAPI(
        title="kokoro-tvm",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    set_state(
        app,
        speaker=speaker,
        scheduler=scheduler,
        voices=voices or VoiceBook(),
        limits=limits or Limits(),
        metrics=metrics,
    )
    errors.install(app)
    app.add_middleware(RequestGuard, config=guard or GuardConfig(), limited_paths=SPEECH_PATHS)
    app.add_middleware(HttpMetrics, metrics=metrics, router=app.router)  # outermost: counts the guard's answers
    for router in ROUTERS:
        app.include_router(router)
    web.install(app)
    return app
