"""Response bodies: a job's chunks, as they are synthesized, encoded and (for captions) timed.

``ChunkStream`` carries results from the scheduler's thread into the event loop and
tells the scheduler each chunk taken, which paces the job to its consumer (a stream to
its client's reading). The generators cancel the job when they stop early; the request
guard (``guard.py``) also cancels it when the request ends, whatever ended it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json

import numpy as np
from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.speech.encoders import make_encoder


class SynthesisError(RuntimeError):
    """The model failed on a chunk: a bug or a broken install, logged with the request id, answered 500."""


class ChunkStream:
    """A request's plan on the scheduler; iterating yields its ``SpeechChunk``s (audio and word timings) in order.
    ``on_audio(seconds)`` is called with each chunk's length as it is taken (the guard's deadline moves by it);
    ``volume`` scales the samples (clipped to [-1, 1]); ``since``: the request's arrival (``time.monotonic()``),
    where its time to first audio starts."""

    def __init__(self, scheduler, plan, on_audio=None, volume: float = 1.0, since: float | None = None):
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()  # at most ``scheduler.ahead`` chunks wait in it
        self._scheduler = scheduler
        self._plan = plan
        self._on_audio = on_audio
        self._volume = volume
        self.count = len(plan.chunks)
        self.input_tokens = sum(len(c.tokens) for c in plan.chunks)
        self.frames = 0  # the model's output frames so far (its durations' sum)
        self.job = scheduler.submit(plan.chunks, self._deliver, since=since)

    def _deliver(self, index, result, error) -> None:  # on the scheduler's thread
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (index, result, error))
        except RuntimeError:  # the event loop is gone (server shutting down)
            pass

    async def __aiter__(self):
        for _ in range(self.count):
            index, result, error = await self._queue.get()
            if error is not None:
                raise SynthesisError(f"synthesis failed on chunk {index}") from error
            chunk = self._plan.result(index, *result)
            self._scheduler.took(self.job, index + 1)
            self.frames += int(np.sum(chunk.durations))
            if self._volume != 1.0:
                audio = np.clip(chunk.audio * np.float32(self._volume), -1.0, 1.0)
                chunk = dataclasses.replace(chunk, audio=audio)
            if self._on_audio is not None:
                self._on_audio(len(chunk.audio) / self._plan.sample_rate)
            yield chunk

    def cancel(self) -> None:
        self._scheduler.cancel(self.job)


async def _encoded(stream: ChunkStream, fmt: str, sample_rate: int, seekable: bool = False):
    """``(chunk, encoded bytes)`` per chunk, the encoder's tail with the last one; cancels the rest when stopped."""
    encoder = make_encoder(fmt, sample_rate, seekable=seekable)
    try:
        async for chunk in stream:
            data = await run_in_threadpool(encoder.encode, chunk.audio)
            if chunk.index == stream.count - 1:
                data += await run_in_threadpool(encoder.finish)
            yield chunk, data
    finally:
        stream.cancel()


async def audio_chunks(stream: ChunkStream, fmt: str, sample_rate: int):
    """Encoded audio bytes, each piece as soon as its chunk is synthesized."""
    async for _, data in _encoded(stream, fmt, sample_rate):
        if data:
            yield data


def _event(body: dict) -> str:
    return f"data: {json.dumps(body)}\n\n"


async def audio_events(stream: ChunkStream, fmt: str, sample_rate: int):
    """OpenAI's ``stream_format: "sse"``: a ``speech.audio.delta`` event per encoded piece (its bytes in base64;
    joined, they are the ``fmt`` file), then ``speech.audio.done`` with the usage: the phoneme tokens read and the
    audio frames made (25 ms each at speed 1)."""
    async for _, data in _encoded(stream, fmt, sample_rate):
        if data:
            yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
    usage = {"input_tokens": stream.input_tokens, "output_tokens": stream.frames}
    yield _event({"type": "speech.audio.done", "usage": {**usage, "total_tokens": sum(usage.values())}})


async def audio_whole(stream: ChunkStream, fmt: str, sample_rate: int) -> bytes:
    return b"".join([data async for _, data in _encoded(stream, fmt, sample_rate, seekable=True)])


def _times(chunk, timestamps: bool) -> list[dict]:
    return [t.as_json() for t in chunk.words if t.word] if timestamps else []


async def captioned_lines(stream: ChunkStream, fmt: str, sample_rate: int, timestamps: bool):
    """Newline-delimited JSON, one object per chunk; times from the start of the whole response."""
    async for chunk, data in _encoded(stream, fmt, sample_rate):
        body = {
            "audio": base64.b64encode(data).decode(),
            "audio_format": fmt,
            "timestamps": _times(chunk, timestamps) if timestamps else None,
        }
        yield json.dumps(body) + "\n"


async def captioned_whole(stream: ChunkStream, fmt: str, sample_rate: int, timestamps: bool) -> dict:
    parts, times = [], []
    async for chunk, data in _encoded(stream, fmt, sample_rate):
        parts.append(data)
        times += _times(chunk, timestamps)
    return {
        "audio": base64.b64encode(b"".join(parts)).decode(),
        "audio_format": fmt,
        "timestamps": times if timestamps else None,
    }
