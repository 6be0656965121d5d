"""A running ``kokoro-tvm serve``, seen from outside: starting one on a free loopback port, when it is healthy, its
own totals from ``/metrics``, and ending it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kokoro_harness.ports import free_port


def source_env(overrides: dict | None = None) -> dict:
    """This process's environment with ``overrides``, and the imported ``kokoro_tvm_ext``'s tree first on
    ``PYTHONPATH`` (a child runs the same package, installed or not)."""
    import kokoro_tvm_ext

    env = {**os.environ, **(overrides or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(kokoro_tvm_ext.__file__).parent.parent), env.get("PYTHONPATH", "")])
    return env


@contextlib.contextmanager
def running_server(
    artifact: Path, log_path: Path, *args: str, env: dict | None = None, timeout: float = 180
) -> Iterator[tuple[subprocess.Popen, str]]:
    """``kokoro-tvm serve --artifact ARTIFACT --port P ARGS...`` on a free loopback port (``source_env(env)``), its
    output in ``log_path``: (its process, its base URL), stopped on leaving. RuntimeError with the log's tail if it
    does not become healthy within ``timeout`` seconds."""
    port = free_port()
    command = [sys.executable, "-m", "kokoro_tvm_ext.cli", "serve", "--artifact", str(artifact), "--port", str(port)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT, env=source_env(env))
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(url, proc, timeout=timeout)
        except RuntimeError as err:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"server {err}:\n{Path(log_path).read_text()[-3000:]}") from None
        try:
            yield proc, url
        finally:
            stop(proc)


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
