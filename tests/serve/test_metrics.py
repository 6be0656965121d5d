"""/metrics after known traffic, read with prometheus_client's own parser: every counter moved by exactly what the
traffic did. The app runs on a stand-in Speaker (each word one chunk of CHUNK_SECONDS), over a real socket."""

from __future__ import annotations

import time

import httpx
import pytest
from fakes import SAMPLE_RATE, fake_server

parser = pytest.importorskip("prometheus_client.parser")

CHUNK_SECONDS = 0.25


def scrape(url: str) -> dict:
    """``{(sample name, frozenset of labels): value}`` of the whole scrape."""
    r = httpx.get(f"{url}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in parser.text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: dict, after: dict, name: str, **labels) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_counters_and_histograms_move_by_the_traffic():
    with fake_server(chunk_seconds=CHUNK_SECONDS, request_timeout=1.0) as (url, speaker):
        before = scrape(url)
        for text in ("one two three", "four five"):  # 5 chunks
            assert (
                httpx.post(f"{url}/v1/audio/speech", json={"input": text, "response_format": "pcm"}).status_code == 200
            )
        assert httpx.post(f"{url}/v1/audio/speech", json={"input": "x", "speed": 9}).status_code == 400
        assert httpx.get(f"{url}/v1/models/tts-1").status_code == 200
        for junk in ("/wp-admin", "/.env", "/a/b/c"):  # a scan adds no series of its own
            assert httpx.get(f"{url}{junk}").status_code == 404
        # A request cut by its deadline while its second chunk is synthesized: its last two are never made.
        stalled = httpx.post(f"{url}/v1/audio/speech", json={"input": "first stall third fourth", "stream": False})
        assert stalled.status_code == 504
        speaker.release.set()
        deadline = time.monotonic() + 10
        while value(scrape(url), "kokoro_chunks_cancelled_total") - value(before, "kokoro_chunks_cancelled_total") < 2:
            assert time.monotonic() < deadline, "the cancelled request's chunks were never counted"
            time.sleep(0.02)
        after = scrape(url)

    speech = "/v1/audio/speech"
    assert moved(before, after, "kokoro_http_requests_total", route=speech, status="200") == 2
    assert moved(before, after, "kokoro_http_requests_total", route=speech, status="400") == 1
    assert moved(before, after, "kokoro_http_requests_total", route=speech, status="504") == 1
    assert moved(before, after, "kokoro_http_requests_total", route="/v1/models/{model}", status="200") == 1
    assert moved(before, after, "kokoro_http_requests_total", route="unmatched", status="404") == 3
    assert moved(before, after, "kokoro_http_requests_total", route="/metrics", status="200") >= 1
    routes = {dict(labels)["route"] for name, labels in after if name == "kokoro_http_requests_total"}
    assert not routes & {"/wp-admin", "/.env", "/a/b/c"}

    # 5 chunks of the two good requests, 2 of the stalled one (first, stall); third and fourth dropped.
    assert moved(before, after, "kokoro_chunks_done_total") == 7
    assert moved(before, after, "kokoro_chunks_cancelled_total") == 2
    assert moved(before, after, "kokoro_speech_jobs_total") == 3
    assert moved(before, after, "kokoro_speech_jobs_done_total") == 2
    assert moved(before, after, "kokoro_speech_jobs_cancelled_total") == 1
    assert moved(before, after, "kokoro_audio_seconds_total") == pytest.approx(7 * CHUNK_SECONDS)
    assert moved(before, after, "kokoro_time_to_first_audio_seconds_count") == 3
    assert moved(before, after, "kokoro_chunk_synthesis_seconds_count") == 7
    assert value(after, "kokoro_time_to_first_audio_seconds_bucket", le="+Inf") == 3
    # The stall held its chunk until the deadline (1 s) passed: the synthesis histogram saw it.
    assert value(after, "kokoro_chunk_synthesis_seconds_sum") >= 0.9
    assert value(after, "kokoro_queue_depth") == 0 and value(after, "kokoro_parked_jobs") == 0


def test_each_app_has_its_own_registry():
    """Two apps in one process (as in these tests) each count only their own requests."""
    with fake_server() as (first, _), fake_server() as (second, _):
        httpx.get(f"{first}/health")
        httpx.get(f"{first}/health")
        assert value(scrape(first), "kokoro_http_requests_total", route="/health", status="200") == 2
        assert value(scrape(second), "kokoro_http_requests_total", route="/health", status="200") == 0


def test_openmetrics_when_asked():
    with fake_server() as (url, _):
        r = httpx.get(f"{url}/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"})
        assert r.headers["content-type"].startswith("application/openmetrics-text")
        assert r.text.rstrip().endswith("# EOF")


def test_serve_bench_reads_the_model_time_and_audio_of_a_real_request(server, voice):
    """bench/serve.py's model columns come from these totals: after one request to the live server (the real
    model), the audio total moved by exactly the samples sent, and the model's time by no more than the wall."""
    from kokoro_harness.server import model_seconds

    busy_before, audio_before = model_seconds(server)
    start = time.perf_counter()
    body = {"input": "Hi, you. Go on!", "voice": voice, "response_format": "pcm"}
    r = httpx.post(f"{server}/v1/audio/speech", json=body, timeout=120)
    wall = time.perf_counter() - start
    assert r.status_code == 200
    busy, audio = (a - b for a, b in zip(model_seconds(server), (busy_before, audio_before)))
    assert audio == pytest.approx(len(r.content) / 2 / SAMPLE_RATE, abs=1e-9)
    assert 0 < busy < wall
