"""Response bodies: a job's chunks, as they are synthesized, encoded and (for captions) timed.

``ChunkStream`` carries results from the scheduler's thread into the event loop and
tells the scheduler each chunk taken, which paces the job to its consumer (a stream to
its client's reading). The generators cancel the job when they stop early; the request
guard (``guard.py``) also cancels it when the request ends, whatever ended it.
"""

from __future__ import annotations

import asyncio
import base64
import json

from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.speech.encoders import make_encoder


class SynthesisError(RuntimeError):
    """The model failed on a chunk: a bug or a broken install, logged with the request id, answered 500."""


class ChunkStream:
    """A request's plan on the scheduler; iterating yields its ``SpeechChunk``s (audio and word timings) in order.
    ``on_audio(seconds)`` is called with each chunk's length as it is taken (the guard's deadline moves by it)."""

    def __init__(self, scheduler, plan, on_audio=None):
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()  # at most ``scheduler.ahead`` chunks wait in it
        self._scheduler = scheduler
        self._plan = plan
        self._on_audio = on_audio
        self.count = len(plan.chunks)
        self.job = scheduler.submit(plan.chunks, self._deliver)

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
