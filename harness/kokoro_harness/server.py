"""A running ``kokoro-tvm serve``, seen from outside: when it is healthy, its own totals from ``/metrics``, and
ending it."""

from __future__ import annotations

import subprocess
import time


def wait_until_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    """Poll ``GET /health`` until it answers 200; RuntimeError if ``proc`` exits or time runs out."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"not healthy after {timeout:.0f} s")
        time.sleep(0.3)


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """End ``proc``: SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def model_seconds(url: str) -> tuple[float, float]:
    """The server's own totals from ``GET /metrics``: seconds the model spent on chunks, seconds of audio made."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    totals = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            totals[sample.name] = sample.value
    return totals["kokoro_chunk_synthesis_seconds_sum"], totals["kokoro_audio_seconds_total"]
