"""``GET /metrics`` in Prometheus' text format (``prometheus_client``), on a registry of the app's own.

What is measured, and where:
- HTTP requests by route and status: ``HttpMetrics``, an ASGI middleware outside everything else, so the
  guard's own answers (401, 413, 429, 504) count too. The route is the app's route template (``/v1/models/{model}``),
  or ``unmatched``: a scan of made-up paths adds no series.
- Speech work: the scheduler's own counters (``Scheduler.stats``: jobs, chunks done and cancelled, batches,
  errors, audio seconds) and its queue, read when scraped; nothing counts twice.
- Time to first audio (from the request's arrival to its first chunk synthesized) and each chunk's synthesis
  time: histograms fed by the scheduler's worker (``observe_first_audio``, ``observe_chunk``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily
from starlette.routing import Match

try:  # FastAPI >= 0.137 keeps an included router as one node of the app's routes; this lists the routes in it
    from fastapi.routing import iter_route_contexts
except ImportError:  # older FastAPI copies an included router's routes into the app's
    iter_route_contexts = iter

PREFIX = "kokoro"
# Seconds: a first chunk takes ~0.1 s on a fast machine, seconds on a busy one or with a long first clause.
LATENCY_BUCKETS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 60.0)
UNMATCHED = "unmatched"
NO_RESPONSE = "none"  # the client left (or the deadline passed) before any answer


class SchedulerCollector:
    """The scheduler's counters and queue, read at each scrape from ``Scheduler.snapshot()``."""

    COUNTERS = {  # stats key: (metric name, help)
        "requests": ("speech_jobs", "speech requests put on the scheduler"),
        "requests_done": ("speech_jobs_done", "speech requests whose every chunk was synthesized"),
        "requests_cancelled": (
            "speech_jobs_cancelled",
            "speech requests cancelled (client left, deadline passed, stream stopped)",
        ),
        "chunks_done": ("chunks_done", "chunks synthesized"),
        "chunks_cancelled": ("chunks_cancelled", "chunks dropped before synthesis by a cancelled request"),
        "batches": ("model_calls", "calls to the model (a batch of first chunks, or one later chunk)"),
        "errors": ("model_errors", "calls to the model that failed"),
        "audio_seconds": ("audio_seconds", "seconds of audio synthesized"),
    }

    def __init__(self, scheduler):
        self.scheduler = scheduler

    def collect(self):
        stats = self.scheduler.snapshot()
        for key, (name, doc) in self.COUNTERS.items():
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=stats[key])
        yield GaugeMetricFamily(f"{PREFIX}_queue_depth", "jobs whose next chunk waits for the model", stats["queued"])
        yield GaugeMetricFamily(
            f"{PREFIX}_parked_jobs", "jobs waiting for their client to read (paced streams)", stats["parked"]
        )


class Metrics:
    """The app's registry and what feeds it; ``render(accept)`` -> (body, content type) for ``GET /metrics``."""

    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=True)
        self.http_requests = Counter(
            f"{PREFIX}_http_requests",
            "HTTP requests answered, by route template and status",
            ("route", "status"),
            registry=self.registry,
        )
        self.first_audio = Histogram(
            f"{PREFIX}_time_to_first_audio_seconds",
            "from a speech request's arrival to its first chunk's audio synthesized",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.synthesis = Histogram(
            f"{PREFIX}_chunk_synthesis_seconds",
            "the model's time on one chunk (its share of a batch: from the previous item's audio to its own)",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def watch(self, scheduler) -> None:
        """Report ``scheduler``'s counters and queue."""
        self.registry.register(SchedulerCollector(scheduler))

    # -- fed by the scheduler's worker thread (prometheus_client's metrics are thread-safe) --
    def observe_first_audio(self, seconds: float) -> None:
        self.first_audio.observe(seconds)

    def observe_chunk(self, seconds: float) -> None:
        self.synthesis.observe(seconds)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


def route_of(routes, scope) -> str:
    """The template of the route ``scope`` goes to (also for a wrong method: 405), else ``unmatched``."""
    partial = None
    for route in iter_route_contexts(routes):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route.path
        if match == Match.PARTIAL and partial is None:
            partial = route.path
    return partial or UNMATCHED


class HttpMetrics:
    """ASGI middleware: counts each HTTP request by route and the status it was answered with."""

    def __init__(self, app, metrics: Metrics, router):
        self.app, self.metrics, self.router = app, metrics, router

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_of(self.router.routes, scope)  # before the app: routing rewrites the scope of a mount
        status = NO_RESPONSE

        async def noting_send(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            self.metrics.http_requests.labels(route=route, status=status).inc()
