"""Many clients at once on one model: all served, a disconnect cancels its work, first chunks go first."""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from conftest import SPEED, speech

TEXTS = ["Hi, one.", "Two, yes.", "Three! Go.", "Four, ok."]


def stats(server) -> dict:
    r = httpx.get(f"{server}/health")
    assert r.status_code == 200
    return r.json()["scheduler"]


def wait_until_cancelled(server, before) -> dict:
    deadline = time.monotonic() + 60
    while True:
        now = stats(server)
        if now["requests_cancelled"] > before["requests_cancelled"] and now["queued"] == 0:
            return now
        assert time.monotonic() < deadline, f"not cancelled: {now}"
        time.sleep(0.2)


def test_sixteen_concurrent_requests_all_succeed_with_their_own_audio(openai_client, server, voice):
    want = {t: speech(server, input=t, voice=voice, response_format="pcm", stream=False).content for t in TEXTS}

    def one(i):
        with openai_client.audio.speech.with_streaming_response.create(
            model="kokoro", voice=voice, input=TEXTS[i % 4], response_format="pcm", speed=SPEED
        ) as r:
            return TEXTS[i % 4], b"".join(r.iter_bytes())

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    assert len(results) == 16
    for text, data in results:
        # Batched with others, a chunk equals its solo run to rounding (KokoroTVM.synthesize_batch).
        got, ref = np.frombuffer(data, "<i2"), np.frombuffer(want[text], "<i2")
        assert got.shape == ref.shape, text
        assert np.abs(got.astype(np.int32) - ref).max() <= 4, text


def test_a_client_that_disconnects_mid_stream_has_its_work_cancelled(server, voice):
    before = stats(server)
    text = " ".join(f"This is sentence number {n}." for n in range(1, 31))
    with httpx.stream(
        "POST",
        f"{server}/v1/audio/speech",
        timeout=120,
        json={"input": text, "voice": voice, "response_format": "pcm", "speed": SPEED},
    ) as r:
        assert r.status_code == 200
        first = next(r.iter_raw())
        assert first
    now = wait_until_cancelled(server, before)
    # 31 chunks planned; the one in progress when the disconnect was seen may finish, no more.
    assert now["chunks_cancelled"] - before["chunks_cancelled"] >= 25
    assert now["chunks_done"] - before["chunks_done"] <= 5
    ok = speech(server, input="Still fine.", voice=voice, response_format="pcm", stream=False)
    assert ok.status_code == 200 and len(ok.content) > 0


async def _hang_up_once_scheduled(server: str, path: str, payload: dict, before: dict) -> None:
    """POST ``payload`` and drop the connection as soon as the server has put the request on its scheduler
    (a fixed read timeout raced the server's planning on a loaded host: gone before it was scheduled, the
    request was rightly never started, and nothing was left to cancel)."""
    async with httpx.AsyncClient(timeout=60) as client:
        post = asyncio.create_task(client.post(f"{server}{path}", json=payload))
        deadline = time.monotonic() + 60
        while (await client.get(f"{server}/health")).json()["scheduler"]["requests"] == before["requests"]:
            assert not post.done(), f"answered before it could be abandoned: {post.result()}"
            assert time.monotonic() < deadline, "the request never reached the scheduler"
            await asyncio.sleep(0.05)
        post.cancel()  # the client's connection closes with its task
        with contextlib.suppress(asyncio.CancelledError):
            await post


@pytest.mark.parametrize("path", ["/v1/audio/speech", "/dev/captioned_speech"])
def test_a_client_that_gives_up_on_a_whole_response_has_its_work_cancelled(server, voice, path):
    """stream=false: nothing is sent until the end, so the server must notice the closed socket itself."""
    before = stats(server)
    text = " ".join(f"This is sentence number {n}." for n in range(1, 31))
    payload = {"input": text, "voice": voice, "response_format": "pcm", "speed": SPEED, "stream": False}
    asyncio.run(_hang_up_once_scheduled(server, path, payload, before))
    now = wait_until_cancelled(server, before)
    assert now["chunks_cancelled"] - before["chunks_cancelled"] >= 20
    ok = speech(server, input="Still fine.", voice=voice, response_format="pcm", stream=False)
    assert ok.status_code == 200 and len(ok.content) > 0


def test_first_chunks_go_before_later_chunks_of_a_long_request(runtime):
    """On the real model, in process: a short request arriving while a long one runs gets its
    first (only) chunk before the long request's remaining chunks."""
    import threading

    from kokoro_tvm_ext.serve.scheduler import Scheduler
    from kokoro_tvm_ext.speech import PlannedChunk, Speaker

    scheduler = Scheduler(Speaker(runtime), max_batch=4)
    order, done = [], threading.Event()
    style = np.zeros((1, 256), np.float32)

    def piece(seed):
        return PlannedChunk("", np.array([50, 83, 156, 16, 43], np.int64), style, SPEED, seed)

    def recorder(name, total):
        def deliver(index, result, error):
            assert error is None
            order.append((name, index))
            if name == "long" and index == total - 1:
                done.set()

        return deliver

    try:
        scheduler.submit([piece(i) for i in range(6)], recorder("long", 6))
        while not order:
            time.sleep(0.01)
        scheduler.submit([piece(9)], recorder("short", 1))
        assert done.wait(120)
    finally:
        scheduler.stop()
    assert order.index(("short", 0)) <= 2, order
    assert [i for name, i in order if name == "long"] == list(range(6))


def test_a_batch_of_first_chunks_delivers_each_as_soon_as_its_audio_is_made(runtime):
    """Four first chunks batched together: the first request's audio goes out before the fourth
    request's audio stage has even run, and each equals its solo synthesis."""
    import threading

    from kokoro_tvm_ext.serve.scheduler import Scheduler
    from kokoro_tvm_ext.speech import PlannedChunk, Speaker

    events, gate, delivered = [], threading.Event(), threading.Semaphore(0)

    class Recording(Speaker):
        def synthesize(self, chunks):
            gate.wait(60)  # hold the worker until all four requests wait, so they form one batch
            for i, result in enumerate(super().synthesize(chunks)):
                events.append(("made", len(chunks), i))
                yield result

    scheduler = Scheduler(Recording(runtime), max_batch=4)
    style = np.zeros((1, 256), np.float32)
    tokens = [np.array([50, 83, 156, 16, 43][: 2 + k], np.int64) for k in range(4)]
    got = {}

    def recorder(k):
        def deliver(index, result, error):
            assert error is None
            events.append(("delivered", k))
            got[k] = result[0]
            delivered.release()

        return deliver

    try:
        scheduler.submit([PlannedChunk("", np.array([16], np.int64), style, SPEED, 0)], recorder("blocker"))
        for k in range(4):
            scheduler.submit([PlannedChunk("", tokens[k], style, SPEED, k)], recorder(k))
        gate.set()
        for _ in range(5):
            assert delivered.acquire(timeout=120)
    finally:
        scheduler.stop()
    batch = [e for e in events if e[0] == "delivered" or e[1] == 4]
    assert batch.index(("delivered", 0)) < batch.index(("made", 4, 3)), events
    for k in range(4):
        solo, _ = runtime.synthesize(tokens[k], style, speed=SPEED, noise_seed=k)
        np.testing.assert_allclose(got[k], solo, rtol=0, atol=1e-4)
