"""The server's app on a stand-in Speaker, served by uvicorn in this process on a real loopback socket.

No model: each planned chunk "synthesizes" to ``chunk_seconds`` of silence at once, so the tests see
the server's own behaviour (limits, pacing, deadlines, errors) in milliseconds. What a request's text
asks of the stand-in: ``crash`` raises an unexpected error while planning, ``cancelled`` raises
RequestCancelled, ``slow`` plans until its cancel event is set, ``hold`` plans until the test releases
it; otherwise one chunk per word, and a word ``stall`` takes until the test releases it to synthesize.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace

import numpy as np

from kokoro_tvm_ext.errors import RequestCancelled
from kokoro_tvm_ext.speech import PlannedChunk
from kokoro_tvm_ext.speech.speaker import SpeechPlan

SAMPLE_RATE = 24000


class FakeSpeaker:
    sample_rate = SAMPLE_RATE
    max_tokens = 510

    def __init__(self, chunk_seconds: float = 1.0):
        self.chunk_samples = round(chunk_seconds * SAMPLE_RATE)
        self.model = SimpleNamespace(name="fake")
        self.synthesized = 0
        self.cancelled_plans = 0
        self.release = threading.Event()  # lets ``hold`` requests finish planning
        self.planning = threading.Semaphore(0)  # released when a ``slow`` or ``hold`` plan starts

    def voice(self, voice, lang=None):
        return voice

    def plan(self, text, voice, *, cancel, **options):
        if text == "crash":
            raise RuntimeError("secret detail of /srv/internal/state")
        if text == "cancelled":
            raise RequestCancelled("the caller set the cancel event")
        if text in ("slow", "hold"):
            self.planning.release()
            while not (text == "hold" and self.release.is_set()):
                if cancel.wait(0.02):
                    self.cancelled_plans += 1
                    raise RequestCancelled("planning stopped")
        style = np.zeros((1, 256), np.float32)
        chunks = [PlannedChunk(word, np.array([1], np.int64), style, 1.0, i) for i, word in enumerate(text.split())]
        return SpeechPlan(chunks, voice, {}, SAMPLE_RATE)

    def synthesize(self, chunks):
        for chunk in chunks:
            if chunk.phonemes == "stall":
                self.release.wait(30)
            self.synthesized += 1
            yield np.zeros(self.chunk_samples, np.float32), np.zeros(3, np.int64)


class FakeVoices:
    """Any voice exists; ``alloy`` is an alias of ``af_alloy``."""

    aliases = {"alloy": "af_alloy"}

    def choose(self, spec):
        return self.aliases.get(spec, spec)

    def listing(self):
        return []

    def alias_listing(self):
        return [{"id": name, "voice": voice} for name, voice in self.aliases.items()]


@contextlib.contextmanager
def fake_server(chunk_seconds: float = 1.0, host: str = "127.0.0.1", **guard):
    """``(base URL, FakeSpeaker)`` of the app with ``GuardConfig(**guard)`` on a free port of ``host``, on the
    listening socket and connection bounds ``kokoro-tvm serve`` uses."""
    import uvicorn

    from kokoro_tvm_ext.serve.app import create_app
    from kokoro_tvm_ext.serve.guard import GuardConfig
    from kokoro_tvm_ext.serve.listen import listening_socket, server_config

    speaker = FakeSpeaker(chunk_seconds)
    bounds = GuardConfig(**guard)
    app = create_app(speaker, voices=FakeVoices(), guard=bounds)
    config = server_config(app, host=host, port=0, log_level="warning", bounds=bounds)
    sock = listening_socket(config)
    port = sock.getsockname()[1]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the in-process server did not start"
        time.sleep(0.01)
    try:
        yield f"http://{f'[{host}]' if ':' in host else host}:{port}", speaker
    finally:
        speaker.release.set()
        server.should_exit = True
        thread.join(20)
