"""What a route takes from the app: the objects ``create_app`` puts on ``app.state``, and the guard's
``RequestContext``, as FastAPI dependencies (``speaker: SpeakerDep`` in a route's signature).

Async functions, so FastAPI calls them on the event loop instead of handing each to a worker thread. None adds
a parameter to the OpenAPI schema: each reads only the request.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from kokoro_tvm_ext.serve.guard import RequestContext, context_of
from kokoro_tvm_ext.serve.metrics import Metrics
from kokoro_tvm_ext.serve.plan import Limits
from kokoro_tvm_ext.serve.scheduler import Scheduler
from kokoro_tvm_ext.serve.voices import VoiceBook


def set_state(
    app: FastAPI, *, speaker, scheduler: Scheduler, voices: VoiceBook, limits: Limits, metrics: Metrics
) -> None:
    """Put what the routes use on ``app.state`` (``scheduler`` is also what a Wyoming server beside the app
    shares: ``app.state.scheduler``)."""
    app.state.speaker = speaker
    app.state.scheduler = scheduler
    app.state.voices = voices
    app.state.limits = limits
    app.state.metrics = metrics


async def _speaker(request: Request):
    return request.app.state.speaker


async def _scheduler(request: Request) -> Scheduler:
    return request.app.state.scheduler


async def _voices(request: Request) -> VoiceBook:
    return request.app.state.voices


async def _limits(request: Request) -> Limits:
    return request.app.state.limits


async def _metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def _context(request: Request) -> RequestContext:
    return context_of(request)


# A loaded ``speech.Speaker`` (or anything with its ``plan``, ``voice``, ``synthesize`` and ``sample_rate``).
SpeakerDep = Annotated[Any, Depends(_speaker)]
SchedulerDep = Annotated[Scheduler, Depends(_scheduler)]
VoicesDep = Annotated[VoiceBook, Depends(_voices)]
LimitsDep = Annotated[Limits, Depends(_limits)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
ContextDep = Annotated[RequestContext, Depends(_context)]
