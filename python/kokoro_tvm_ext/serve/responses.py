"""Response bodies: a job's chunks (``chunk_stream.ChunkStream``), as they are synthesized, encoded and (for
captions) timed. The generators cancel the job when they stop early; the request guard (``guard.py``) also
cancels it when the request ends, whatever ended it.
"""

from __future__ import annotations

import base64
import json

from starlette.concurrency import run_in_threadpool

from kokoro_tvm_ext.serve.chunk_stream import ChunkStream
from kokoro_tvm_ext.speech.audio import StreamEncoder


async def _encoded(stream: ChunkStream, fmt: str, sample_rate: int, seekable: bool = False):
    """``(chunk, encoded bytes)`` per chunk, the encoder's tail with the last one; cancels the rest when stopped."""
    encoder = StreamEncoder(fmt, sample_rate, seekable=seekable)
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
    return [t.as_json() for t in chunk.words if t.word or t.mark is not None] if timestamps else []


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
