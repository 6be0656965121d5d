"""`kokoro-tvm book --ray` on a real two-node Ray cluster on this machine: a head and a second node,
each started by `ray start` as its own processes on loopback with one CPU, so the units run on
both nodes. The output must equal the single-process run sample for sample (both at one thread
per process: other thread counts tile the sums differently), including when a worker process is
killed while it speaks a unit: Ray runs that task again, and the chapters come out whole, each
unit once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from book_inputs import book_args
from kokoro_harness.local_ray import local_cluster
from kokoro_harness.ports import free_port

sf = pytest.importorskip("soundfile")
TASK_TITLE = "ray::_render_task"  # a Ray worker's process title while it runs our task


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The address of a running two-node cluster, stopped afterwards."""
    with local_cluster(tmp_path_factory.mktemp("ray")) as address:
        yield address


def _running_tasks(cluster: str) -> dict[int, int]:
    """{pid: parent pid} of the worker processes running a unit now on ``cluster`` (a worker's parent is its
    node's raylet, which names the cluster's GCS: another test run's cluster on the machine does not count).

    Only children of a raylet count: a process the task forks carries the task's title until it execs, and
    under load a scan caught one (its parent, the worker, then counted as a third node)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(TASK_TITLE.encode()):
                    parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    raylet = Path(f"/proc/{parent}/cmdline").read_bytes()
                    if b"raylet" in raylet and f"--gcs-address={cluster}".encode() in raylet:
                        found[int(entry.name)] = parent
            except (OSError, IndexError, ValueError):
                continue
    return found


def _chapters(directory: Path) -> list[np.ndarray]:
    files = sorted(directory.glob("*.wav"))
    assert [f.name for f in files] == ["01 The Start.wav", "02 The End.wav"]
    return [sf.read(f, dtype="int16")[0] for f in files]


def _book(args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kokoro_tvm_ext.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_a_two_node_cluster_writes_the_local_output_even_when_a_worker_is_killed(
    cluster, tmp_path, book_md, artifact, voice_file
):
    local = _book(book_args(book_md, tmp_path / "local", artifact, voice_file, "--unit-chars", "60", "--threads", "1"))
    assert local.wait(timeout=600) == 0, local.stderr.read()[-3000:]
    expected = _chapters(tmp_path / "local")

    # Every unit runs on the cluster; a worker is killed in the middle of its task.
    job = _book(book_args(book_md, tmp_path / "ray", artifact, voice_file, "--unit-chars", "60", "--ray", cluster))
    killed, first_seen, raylets = None, None, set()
    deadline = time.monotonic() + 600
    while job.poll() is None and time.monotonic() < deadline:
        tasks = _running_tasks(cluster)
        raylets.update(tasks.values())
        if killed is None and tasks:
            first_seen = first_seen or time.monotonic()
            if time.monotonic() - first_seen > 0.5:  # well inside a task: G2P or synthesis
                pid = min(tasks)
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
                except ProcessLookupError:
                    first_seen = None
        time.sleep(0.05)
    out, err = job.communicate(timeout=600)
    assert killed is not None, f"no worker was seen running a unit: {err[-2000:]}"
    assert job.returncode == 0, err[-3000:]
    assert len(raylets) == 2, f"units ran under {len(raylets)} node(s), not both"
    got = _chapters(tmp_path / "ray")
    for a, b in zip(got, expected):
        assert a.shape == b.shape  # nothing lost, nothing twice
        np.testing.assert_array_equal(a, b)
    assert not (tmp_path / ".ray.book").exists()


def test_an_unreachable_cluster_is_one_clear_line(tmp_path, book_md, artifact, voice_file):
    job = _book(book_args(book_md, tmp_path / "out", artifact, voice_file, "--ray", f"127.0.0.1:{free_port()}"))
    _, err = job.communicate(timeout=300)
    assert job.returncode != 0
    assert "kokoro-tvm book: --ray 127.0.0.1:" in err and "cannot connect" in err, err[-2000:]
    assert not (tmp_path / "out").exists()


def test_the_ray_serve_deployment_answers_as_the_server_does_and_enforces_its_keys_and_hosts(cluster, artifact):
    """The server's app behind Ray Serve (one replica on the cluster) returns the samples the same app
    returns in this process, and takes `kokoro-tvm serve`'s API keys, allowed hosts and bounds: a request
    without the key, naming another host or over the body limit is refused before any synthesis."""
    import io

    import httpx
    import ray
    from fastapi.testclient import TestClient
    from ray import serve

    from kokoro_tvm_ext.serve.app import create_app
    from kokoro_tvm_ext.serve.ray_deployment import build_app
    from kokoro_tvm_ext.speech import Speaker

    body = {"input": "Hello there. Ray serves this.", "response_format": "wav", "speed": 4.0, "stream": False}
    with TestClient(create_app(Speaker.load(artifact))) as client:
        local = client.post("/v1/audio/speech", json=body)
    assert local.status_code == 200, local.text
    expected, _ = sf.read(io.BytesIO(local.content), dtype="int16")

    key = "ray-serve-key-0123"
    auth = {"authorization": f"Bearer {key}"}
    port = free_port()
    ray.init(address=cluster, logging_level="ERROR", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        app = build_app(str(artifact), num_replicas=1, api_key=[key], allowed_hosts="127.0.0.1", max_body_bytes=4096)
        serve.run(app, name="kokoro", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health", timeout=60).json()["status"] == "healthy"  # open, as in `serve`
        refusals = {
            "missing_api_key": httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60),
            "invalid_api_key": httpx.post(
                f"{url}/v1/audio/speech", json=body, headers={"authorization": "Bearer nope"}, timeout=60
            ),
            "host_not_allowed": httpx.post(
                f"{url}/v1/audio/speech", json=body, headers={**auth, "host": "attacker.example"}, timeout=60
            ),
            "request_too_large": httpx.post(
                f"{url}/v1/audio/speech", json={**body, "padding": "x" * 5000}, headers=auth, timeout=60
            ),
        }
        docs = httpx.get(f"{url}/docs", headers=auth, timeout=60)
        health = httpx.get(f"{url}/health", timeout=60).json()["scheduler"]
        reply = httpx.post(f"{url}/v1/audio/speech", json=body, headers=auth, timeout=300)
        assert reply.status_code == 200, reply.text
        got, rate = sf.read(io.BytesIO(reply.content), dtype="int16")
    finally:
        serve.shutdown()
        ray.shutdown()
    statuses = {"missing_api_key": 401, "invalid_api_key": 401, "host_not_allowed": 400, "request_too_large": 413}
    for code, refused in refusals.items():
        assert (refused.status_code, refused.json()["error"]["code"]) == (statuses[code], code), refused.text
    assert docs.status_code == 404
    assert health["requests"] == 0, health  # nothing refused reached the model
    assert rate == 24000 and got.shape == expected.shape
    # The replica runs one thread, this process every core: sums tiled differently, one 16-bit step at most.
    np.testing.assert_allclose(got, expected, rtol=0, atol=1)
