"""The operator's routes: ``GET /health`` (200 while the scheduler's worker runs, else 503) and ``GET /metrics``
(Prometheus' text format, ``metrics.py``). Both are answered without an API key (``auth.py``) and count toward no
in-flight limit."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from kokoro_tvm_ext.serve.routes.state import MetricsDep, SchedulerDep, SpeakerDep

router = APIRouter()


@router.get("/health")
async def health(speaker: SpeakerDep, scheduler: SchedulerDep):
    stats = scheduler.snapshot()
    ok = scheduler.alive
    body = {"status": "healthy" if ok else "unavailable", "backend": speaker.model.name, "scheduler": stats}
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics")
async def prometheus_metrics(request: Request, metrics: MetricsDep):
    body, kind = metrics.render(request.headers.get("accept"))
    return Response(body, headers={"Content-Type": kind})
