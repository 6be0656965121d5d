"""Response bodies: a job's chunks, as they are synthesized, encoded and (for captions) timed.

``ChunkStream`` carries results from the scheduler's thread into the event loop.
The generators cancel the job when they stop early (the client disconnected), so
its remaining chunks are never synthesized. A whole (``stream=false``) body has no
generator for the server to stop, so ``unless_disconnected`` watches the client.
"""

from __future__ import annotations

import asyncio
import base64
import json

from starlette.concurrency import run_in_threadpool

from ..timestamps import word_timings
from .encoders import make_encoder
from .errors import ApiError


class SynthesisError(ApiError):
    """The model failed on a chunk (not the client's fault): 500 server_error."""

    def __init__(self, message: str):
        super().__init__(500, message, type="server_error")


class ClientGone(Exception):
    """The client closed the connection before its whole response was ready."""


async def unless_disconnected(request, work, poll_seconds: float = 0.25):
    """Await ``work``; if the client disconnects first, cancel it (its ``finally`` cancels the job)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=poll_seconds)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class ChunkStream:
    def __init__(self, scheduler, pieces):
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()
        self._scheduler = scheduler
        self.count = len(pieces)
        self.job = scheduler.submit(pieces, self._deliver)

    def _deliver(self, index, result, error) -> None:  # on the scheduler's thread
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (index, result, error))
        except RuntimeError:  # the event loop is gone (server shutting down)
            pass

    async def __aiter__(self):
        for _ in range(self.count):
            index, result, error = await self._queue.get()
            if error is not None:
                raise SynthesisError(f"synthesis failed: {type(error).__name__}: {error}") from error
            yield index, result

    def cancel(self) -> None:
        self._scheduler.cancel(self.job)


async def audio_chunks(stream: ChunkStream, fmt: str, sample_rate: int):
    """Encoded audio bytes, each piece as soon as its chunk is synthesized."""
    encoder = make_encoder(fmt, sample_rate)
    try:
        async for index, (audio, _) in stream:
            data = await run_in_threadpool(encoder.encode, audio)
            if index == stream.count - 1:
                data += await run_in_threadpool(encoder.finish)
            if data:
                yield data
    finally:
        stream.cancel()


async def audio_whole(stream: ChunkStream, fmt: str, sample_rate: int) -> bytes:
    encoder = make_encoder(fmt, sample_rate, seekable=True)
    parts = []
    try:
        async for _, (audio, _) in stream:
            parts.append(await run_in_threadpool(encoder.encode, audio))
        parts.append(await run_in_threadpool(encoder.finish))
        return b"".join(parts)
    finally:
        stream.cancel()


async def captioned_chunks(stream: ChunkStream, chunks, fmt: str, sample_rate: int, vocab, timestamps: bool):
    """Per chunk ``(encoded bytes, [timing json])``, times from the start of the whole response."""
    encoder = make_encoder(fmt, sample_rate)
    offset = 0.0
    try:
        async for index, (audio, durations) in stream:
            data = await run_in_threadpool(encoder.encode, audio)
            if index == stream.count - 1:
                data += await run_in_threadpool(encoder.finish)
            times = []
            if timestamps:
                times = [
                    t.as_json()
                    for t in word_timings(
                        chunks[index].words, durations, vocab, offset_seconds=offset, sample_rate=sample_rate
                    )
                    if t.word
                ]
            offset += len(audio) / sample_rate
            yield data, times
    finally:
        stream.cancel()


async def captioned_lines(stream, chunks, fmt, sample_rate, vocab, timestamps: bool):
    """Newline-delimited JSON, one object per chunk."""
    async for data, times in captioned_chunks(stream, chunks, fmt, sample_rate, vocab, timestamps):
        body = {
            "audio": base64.b64encode(data).decode(),
            "audio_format": fmt,
            "timestamps": times if timestamps else None,
        }
        yield json.dumps(body) + "\n"


async def captioned_whole(stream, chunks, fmt, sample_rate, vocab, timestamps: bool) -> dict:
    parts, times = [], []
    async for data, chunk_times in captioned_chunks(stream, chunks, fmt, sample_rate, vocab, timestamps):
        parts.append(data)
        times += chunk_times
    return {
        "audio": base64.b64encode(b"".join(parts)).decode(),
        "audio_format": fmt,
        "timestamps": times if timestamps else None,
    }
