"""A live `kokoro-tvm serve` on a free loopback port, on a small random-weights artifact.

The artifact is the session's ``small_artifact`` (tests/conftest.py: Kokoro's real
config, random weights, seed 0, cached across runs). Random weights speak ~25 frames per token at speed 1, so requests
use speed 4 to keep the frame count (and test time) small.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from kokoro_harness.server import running_server as harness_running_server
from kokoro_harness.server import source_env, stop

SPEED = 4.0
SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 600


@pytest.fixture(scope="session")
def artifact(small_artifact) -> Path:
    return small_artifact


@pytest.fixture(scope="session")
def runtime(artifact):
    """The same artifact in this process, for expectations computed from durations."""
    from kokoro_tvm_ext import KokoroTVM

    return KokoroTVM(artifact)


# Home Assistant's protocol beside HTTP, on the same model (tests/serve/test_wyoming.py).
SERVE_ARGS = ("--max-input-chars", "2000", "--log-level", "info", "--wyoming", "tcp://127.0.0.1:0")


def running_server(artifact: Path, log_path: Path, env_overrides: dict | None = None):
    """`kokoro-tvm serve` on ``artifact`` with this suite's arguments: (its process, its base URL)."""
    return harness_running_server(artifact, log_path, *SERVE_ARGS, env=env_overrides)


@pytest.fixture(scope="session")
def server_log(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("serve") / "server.log"


@pytest.fixture(scope="session")
def server_process(artifact, server_log):
    """A live server: (its process, its base URL)."""
    with running_server(artifact, server_log) as started:
        yield started


def tcp_address_in_log(log_path: Path, after: str) -> tuple[str, int]:
    """(host, port) of the ``tcp://HOST:PORT`` a server logged after ``after`` (it listened on port 0)."""
    address = log_path.read_text().split(f"{after} tcp://")[1].split()[0]
    host, port = address.rsplit(":", 1)
    return host, int(port)


@contextlib.contextmanager
def running_wyoming(artifact: Path, log_path: Path, *options: str):
    """`kokoro-tvm wyoming --artifact ARTIFACT --uri tcp://127.0.0.1:0 OPTIONS` in a process of its own, logging to
    ``log_path``: yields its (host, port) once it listens, and checks on the way out that it is still running and
    logged no traceback (no user error logs one) and no warning (a request's input warnings are its client's), then
    ends it."""
    command = [sys.executable, "-m", "kokoro_tvm_ext.cli", "wyoming", "--artifact", str(artifact)]
    command += ["--uri", "tcp://127.0.0.1:0", *options]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=source_env())
    try:
        deadline = time.monotonic() + 180
        while "listening on tcp://" not in log_path.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"kokoro-tvm wyoming did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield tcp_address_in_log(log_path, "listening on")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        assert "Traceback" not in log_path.read_text(), log_path.read_text()[-3000:]
        assert "arning" not in log_path.read_text(), log_path.read_text()[-3000:]
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def server_wyoming(server_process, server_log) -> tuple[str, int]:
    """(host, port) of the live server's Wyoming side (`serve --wyoming` on port 0)."""
    return tcp_address_in_log(server_log, "Wyoming on")


@pytest.fixture(scope="session")
def server(server_process) -> str:
    """Base URL of the live server."""
    return server_process[1]


@pytest.fixture(scope="session")
def openai_client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"{server}/v1", api_key="not-needed", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def voice():
    from kokoro_tvm_ext.speech import list_voices

    voices = list_voices()
    if not voices:
        pytest.skip("no voice packs installed")
    return voices[0].name


def speech(server, **body) -> httpx.Response:
    body.setdefault("speed", SPEED)
    return httpx.post(f"{server}/v1/audio/speech", json=body, timeout=120)
