"""A plan's chunks on the scheduler, taken in order on an event loop: the bridge every protocol (HTTP, Wyoming)
uses between the scheduler's worker thread and its connections.

``ChunkStream`` tells the scheduler each chunk taken, which paces the job to its consumer (a stream to its
client's reading). asyncio and numpy only, so the Wyoming server needs no web framework.
"""

from __future__ import annotations

import asyncio
import dataclasses

import numpy as np


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
