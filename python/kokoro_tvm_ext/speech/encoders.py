"""Streaming audio encoders: float32 24 kHz chunks in, container bytes out as soon as they exist.

Every compressed format goes through FFmpeg's encoders and muxers via PyAV, writing
into a non-seekable sink, so muxers emit a streamable layout (no trailing index to
patch): MP3 (libmp3lame), Opus in Ogg (libopus), AAC in ADTS, FLAC, and WAV (whose
header then carries the "unknown length" sizes that players read as "until the end").
``pcm`` is the raw 16-bit little-endian mono samples, no container.

Samples are converted to 16-bit once, here, the same way for every format, so a
stream and a one-shot response of the same audio carry the same samples.
"""

from __future__ import annotations

import io

import numpy as np

# response_format -> (container, codec, sample format the codec takes, content type)
FORMATS = {
    "mp3": ("mp3", "libmp3lame", "s16p", "audio/mpeg"),
    "opus": ("ogg", "libopus", "s16", "audio/ogg"),
    "aac": ("adts", "aac", "fltp", "audio/aac"),
    "flac": ("flac", "flac", "s16", "audio/flac"),
    "wav": ("wav", "pcm_s16le", "s16", "audio/wav"),
    "pcm": (None, None, None, "audio/pcm"),
}
BITRATES = {"mp3": 128_000, "opus": 64_000, "aac": 128_000}


def to_int16(audio: np.ndarray) -> np.ndarray:
    """float32 in [-1, 1] -> int16, clipped and rounded."""
    return np.round(np.clip(np.asarray(audio, np.float32), -1.0, 1.0) * 32767.0).astype("<i2")


def content_type(fmt: str) -> str:
    return FORMATS[fmt][3]


class _Sink:
    """A write-only file object: PyAV sees no ``seek`` and muxes for streaming."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class PcmEncoder:
    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate

    def encode(self, audio: np.ndarray) -> bytes:
        return to_int16(audio).tobytes()

    def finish(self) -> bytes:
        return b""


class AvEncoder:
    """One PyAV output container per response; ``encode`` returns the bytes muxed so far."""

    def __init__(self, fmt: str, sample_rate: int, seekable: bool = False) -> None:
        import av

        container, codec, sample_format, _ = FORMATS[fmt]
        self._av = av
        self.sample_rate = sample_rate
        # Seekable (a whole response): muxers go back to write exact sizes (WAV, FLAC).
        self._sink = io.BytesIO() if seekable else _Sink()
        # Ogg holds packets until a page spans page_duration (default 1 s); 20 ms pages
        # send each Opus packet as it is made.
        options = {"page_duration": "20000"} if container == "ogg" else {}
        self._out = av.open(self._sink, mode="w", format=container, options=options)
        self._stream = self._out.add_stream(codec, rate=sample_rate, layout="mono")
        if fmt in BITRATES:
            self._stream.bit_rate = BITRATES[fmt]
        self._pts = 0
        self._closed = False
        # The codec's frame size (1152 for MP3, 1024 for AAC, 480 for Opus at 24 kHz, ...)
        # is handled by PyAV's audio FIFO inside encode(); any chunk length works.
        self._resampler = av.AudioResampler(format=sample_format, layout="mono", rate=sample_rate)

    def _mux(self, frame) -> None:
        for packet in self._stream.encode(frame):
            self._out.mux(packet)

    def encode(self, audio: np.ndarray) -> bytes:
        pcm = to_int16(audio)
        if pcm.size:
            frame = self._av.AudioFrame.from_ndarray(pcm[None, :], format="s16", layout="mono")
            frame.sample_rate = self.sample_rate
            frame.pts = self._pts
            self._pts += pcm.size
            for converted in self._resampler.resample(frame):
                self._mux(converted)
        return self._take()

    def finish(self) -> bytes:
        for converted in self._resampler.resample(None):
            self._mux(converted)
        self._mux(None)
        self._out.close()
        self._closed = True
        return self._take()

    def _take(self) -> bytes:
        if isinstance(self._sink, _Sink):
            return self._sink.take()
        return self._sink.getvalue() if self._closed else b""


def make_encoder(fmt: str, sample_rate: int, seekable: bool = False):
    """An encoder for ``fmt``; ``seekable=True`` returns everything from ``finish()`` (exact headers)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown response_format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return PcmEncoder(sample_rate) if fmt == "pcm" else AvEncoder(fmt, sample_rate, seekable)
