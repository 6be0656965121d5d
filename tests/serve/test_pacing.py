"""Streams paced by their clients: synthesis runs a bounded amount ahead of what the client has read
(the scheduler alone, then over a real socket with the stand-in Speaker of ``fakes.py``)."""

from __future__ import annotations

import json
import queue
import socket
import time

import httpx
import numpy as np
from fakes import FakeSpeaker, fake_server

from kokoro_tvm_ext.serve.listen import SEND_BUFFER_BYTES
from kokoro_tvm_ext.serve.scheduler import Scheduler
from kokoro_tvm_ext.speech import PlannedChunk

CHUNK_BYTES = 2 * 24000  # a one-second chunk of the stand-in, as 16-bit pcm


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return value


def dechunk(data: bytes) -> bytes:
    """The body of a chunked transfer encoding."""
    out, pos = bytearray(), 0
    while True:
        end = data.index(b"\r\n", pos)
        size = int(data[pos:end], 16)
        if size == 0:
            return bytes(out)
        out += data[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


def test_a_job_runs_at_most_ahead_chunks_beyond_what_its_consumer_took():
    speaker = FakeSpeaker(chunk_seconds=0.01)
    scheduler = Scheduler(speaker, ahead=2)
    delivered: queue.Queue = queue.Queue()
    piece = PlannedChunk("", np.array([1], np.int64), np.zeros((1, 256), np.float32), 1.0, 0)
    try:
        job = scheduler.submit([piece] * 10, lambda index, result, error: delivered.put(index))
        assert [delivered.get(timeout=10) for _ in range(2)] == [0, 1]
        wait_for(lambda: scheduler.snapshot()["parked"] == 1)
        time.sleep(0.1)
        assert speaker.synthesized == 2 and delivered.empty()
        scheduler.took(job, 1)
        assert delivered.get(timeout=10) == 2
        wait_for(lambda: scheduler.snapshot()["parked"] == 1)
        assert speaker.synthesized == 3
        scheduler.cancel(job)
        stats = scheduler.snapshot()
        assert (stats["parked"], stats["requests_cancelled"], stats["chunks_cancelled"]) == (0, 1, 7)
    finally:
        scheduler.stop()


def test_a_client_that_reads_nothing_holds_a_bounded_amount_of_audio_then_gets_all_of_it():
    """100 one-second chunks, a client that sends its request and reads nothing: synthesis stops after the
    socket buffers' worth plus a few chunks; once the client reads, the rest is made and arrives whole."""
    with fake_server() as (url, speaker):
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps({"input": " ".join(["word"] * 100), "response_format": "pcm"}).encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        with sock:
            wait_for(lambda: httpx.get(f"{url}/health").json()["scheduler"]["parked"] == 1)
            time.sleep(0.3)
            held = speaker.synthesized
            # Linux doubles SO_SNDBUF; a chunk each in the transport, in the response's send and ahead (2).
            assert held <= (2 * SEND_BUFFER_BYTES + 65536) // CHUNK_BYTES + 4, held
            assert httpx.get(f"{url}/health").json()["scheduler"]["chunks_done"] == held
            data = bytearray()
            sock.settimeout(10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)  # now read it fast
            while not data.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's end
                received = sock.recv(1 << 20)
                assert received, "the server closed the stream early"
                data += received
        head, _, chunked = bytes(data).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        assert len(dechunk(chunked)) == 100 * CHUNK_BYTES and speaker.synthesized == 100
