"""An audio route's answer: its encoded audio streamed chunk by chunk as it is synthesized, or whole (exact
headers: a WAV's length) when the request asks ``stream: false``."""

from __future__ import annotations

from fastapi.responses import Response, StreamingResponse

from kokoro_tvm_ext.serve.chunk_stream import ChunkStream
from kokoro_tvm_ext.serve.requests import AudioOptions
from kokoro_tvm_ext.serve.responses import audio_chunks, audio_whole
from kokoro_tvm_ext.speech.audio import content_type


def _disposition(fmt: str) -> dict:
    return {"Content-Disposition": f"attachment; filename=speech.{fmt}"}


async def audio_response(stream: ChunkStream, options: AudioOptions, sample_rate: int) -> Response:
    """``stream``'s audio in ``options.response_format``, streamed if ``options.stream``."""
    fmt = options.response_format
    if options.stream:
        return StreamingResponse(
            audio_chunks(stream, fmt, sample_rate), media_type=content_type(fmt), headers=_disposition(fmt)
        )
    body = await audio_whole(stream, fmt, sample_rate)
    return Response(body, media_type=content_type(fmt), headers=_disposition(fmt))
