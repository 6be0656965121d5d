"""The one audio writer: 24 kHz samples in, a file's bytes out, for `say`, the server and the book.

Samples become 16-bit once, here (``to_int16``: clipped to [-1, 1], rounded), the same way for every format,
so a WAV, a FLAC, a stream and a one-shot response of the same speech carry the same samples. FFmpeg's
encoders and muxers do the rest, through PyAV (``FORMATS``: WAV, FLAC, MP3, Opus in Ogg, AAC in ADTS, AAC in
MPEG-4; ``pcm`` is the raw samples, no container), but for a WAV written where it can seek back (a file, bytes
in memory) without a title: the standard library's ``wave`` writes that one, since loading FFmpeg is a
noticeable part of a cold `say`.

One encoder, ``AudioEncoder``, writes into any binary file object; where it goes decides the rest:
- ``write_audio``: a file, written to a temp name and renamed (``support.cache.AtomicFiles``: never a partial
  file; several files all-or-nothing when the caller passes its own set): `say -o`, the book's files;
- ``encode_audio``: bytes in memory, with exact headers (a seekable buffer): `say -o -`;
- ``StreamEncoder``: the bytes each chunk made, as it is made (the server). Into a write-only sink PyAV sees
  no ``seek``, so the muxers write a streamable layout: no trailing index, and a WAV header with the "unknown
  length" sizes players read as "until the end". Seekable, it returns everything at ``finish`` instead.
Chapter markers are an option of the same encoder (the book): ID3v2 ``CHAP`` frames in MP3, a QuickTime chapter
track and Nero ``chpl`` in MPEG-4.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from kokoro_tvm_ext.support.cache import AtomicFiles
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError


@dataclass(frozen=True)
class AudioFormat:
    name: str
    muxer: str | None  # FFmpeg's; None: the raw samples
    codec: str | None
    sample_format: str | None  # what the codec takes
    bit_rate: int | None
    content_type: str
    suffixes: tuple[str, ...]  # the file names that mean it
    chapters: bool = False  # can carry chapter markers
    streams: bool = True  # can be written where it cannot seek back (MPEG-4 writes its index last)


FORMATS = {
    f.name: f
    for f in (
        AudioFormat("wav", "wav", "pcm_s16le", "s16", None, "audio/wav", (".wav",)),
        AudioFormat("flac", "flac", "flac", "s16", None, "audio/flac", (".flac",)),
        AudioFormat("mp3", "mp3", "libmp3lame", "s16p", 128_000, "audio/mpeg", (".mp3",), chapters=True),
        AudioFormat("opus", "ogg", "libopus", "s16", 64_000, "audio/ogg", (".opus", ".ogg")),
        AudioFormat("aac", "adts", "aac", "fltp", 128_000, "audio/aac", (".aac",)),
        # .m4b is the audiobook's name for the same file.
        AudioFormat("m4a", "ipod", "aac", "fltp", 96_000, "audio/mp4", (".m4a", ".m4b"), chapters=True, streams=False),
        AudioFormat("pcm", None, None, None, None, "audio/pcm", (".pcm",)),
    )
}
SUFFIXES = {suffix: f.name for f in FORMATS.values() for suffix in f.suffixes}


class Chapter(NamedTuple):
    """A chapter marker: its title, its first sample and the sample after its last."""

    title: str
    start: int
    end: int


def to_int16(audio: np.ndarray) -> np.ndarray:
    """float32 in [-1, 1] -> int16, clipped and rounded; int16 passes as it is."""
    audio = np.asarray(audio)
    if audio.dtype == np.int16:
        return audio.astype("<i2", copy=False)
    return np.round(np.clip(audio.astype(np.float32, copy=False), -1.0, 1.0) * 32767.0).astype("<i2")


def content_type(fmt: str) -> str:
    return FORMATS[fmt].content_type


def format_of(path: str | Path) -> str:
    """The format a file name asks for, by its suffix; InvalidInputError naming the suffixes there are."""
    suffix = Path(path).suffix.lower()
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    what = f"{suffix!r} files" if suffix else "a name without a suffix"
    raise InvalidInputError(f"cannot write {what} ({path}): give a name ending in {', '.join(SUFFIXES)}")


def _stdlib_writes(fmt: str, *, seekable: bool, titled: bool) -> bool:
    """Whether the standard library's ``wave`` writes this file (the same samples and exact sizes without loading
    FFmpeg's libraries, ~40 ms of a cold `say`): a WAV without a title into something it can seek back in."""
    return fmt == "wav" and seekable and not titled


def check_format(fmt: str, *, seekable: bool = True, titled: bool = False) -> None:
    """Fail before any speech if ``fmt`` cannot be written here: an unknown name, PyAV missing (for a file the
    standard library does not write: ``seekable`` and ``titled`` say where and how it will be written)."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown audio format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if FORMATS[fmt].muxer is not None and not _stdlib_writes(fmt, seekable=seekable, titled=titled):
        _pyav(fmt)


def _seekable(out: BinaryIO) -> bool:
    seekable = getattr(out, "seekable", None)
    return bool(seekable and seekable())


def _pyav(fmt: str):
    try:
        import av  # FFmpeg's codecs (~36 ms to import): only when a container is written
    except ImportError:
        raise MissingAssetError(f"writing {fmt} audio needs PyAV (FFmpeg's codecs): pip install av") from None
    return av


class AudioEncoder:
    """One file in ``fmt`` written into ``out`` (a binary file object): ``write`` samples (float32, or int16 as
    they are) as they come, any length, then ``close``. ``title``: the file's title tag; ``chapters``: markers,
    for a format that carries them (known before the first sample: MP3 writes them in its header)."""

    def __init__(
        self,
        out: BinaryIO,
        fmt: str,
        sample_rate: int,
        *,
        title: str | None = None,
        chapters: Sequence[Chapter] = (),
    ) -> None:
        seekable, titled = _seekable(out), bool(title)
        check_format(fmt, seekable=seekable, titled=titled)
        spec = FORMATS[fmt]
        if chapters and not spec.chapters:
            with_chapters = ", ".join(f.name for f in FORMATS.values() if f.chapters)
            raise InvalidInputError(f"{fmt} files cannot carry chapter markers; {with_chapters} can")
        self.sample_rate = sample_rate
        self._out = out
        self._raw = spec.muxer is None
        self._wave = None
        if self._raw:
            return
        if _stdlib_writes(fmt, seekable=seekable, titled=titled):  # streams and titles go through PyAV
            self._wave = wave.open(out, "wb")
            self._wave.setnchannels(1)
            self._wave.setsampwidth(2)
            self._wave.setframerate(sample_rate)
            return
        av = self._av = _pyav(fmt)
        # Ogg holds packets until a page spans page_duration (default 1 s); 20 ms pages send each Opus packet
        # as it is made.
        options = {"page_duration": "20000"} if spec.muxer == "ogg" else {}
        self._container = av.open(out, mode="w", format=spec.muxer, options=options)
        self._stream = self._container.add_stream(spec.codec, rate=sample_rate, layout="mono")
        if spec.bit_rate:
            self._stream.bit_rate = spec.bit_rate
        if title:
            self._container.metadata["title"] = title
        if chapters:
            self._container.set_chapters(
                [
                    {
                        "id": i,
                        "start": c.start,
                        "end": c.end,
                        "time_base": Fraction(1, sample_rate),
                        "metadata": {"title": c.title},
                    }
                    for i, c in enumerate(chapters, 1)
                ]
            )
        # The codec's frame size (1152 for MP3, 1024 for AAC, 480 for Opus at 24 kHz, ...) is handled by PyAV's
        # audio FIFO inside encode(): any length of samples works.
        self._resampler = av.AudioResampler(format=spec.sample_format, layout="mono", rate=sample_rate)
        self._pts = 0

    def write(self, audio: np.ndarray) -> None:
        pcm = to_int16(audio)
        if self._raw:
            self._out.write(pcm.tobytes())
            return
        if self._wave is not None:
            self._wave.writeframes(pcm.astype("<i2", copy=False).tobytes())
            return
        if not pcm.size:
            return
        frame = self._av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm)[None, :], format="s16", layout="mono")
        frame.sample_rate, frame.pts = self.sample_rate, self._pts
        self._pts += pcm.size
        for converted in self._resampler.resample(frame):
            self._mux(converted)

    def close(self) -> None:
        """The codec's last frames and the container's trailer."""
        if self._raw:
            return
        if self._wave is not None:
            self._wave.close()  # writes the sizes; leaves ``out`` open
            return
        for converted in self._resampler.resample(None):
            self._mux(converted)
        self._mux(None)
        self._container.close()

    def _mux(self, frame) -> None:
        self._container.mux(self._stream.encode(frame))


def encode_audio(
    pieces: Iterable[np.ndarray],
    sample_rate: int,
    fmt: str,
    *,
    title: str | None = None,
    chapters: Sequence[Chapter] = (),
) -> bytes:
    """``pieces`` one after another as one ``fmt`` file in memory."""
    buffer = io.BytesIO()
    encoder = AudioEncoder(buffer, fmt, sample_rate, title=title, chapters=chapters)
    for piece in pieces:
        encoder.write(piece)
    encoder.close()
    return buffer.getvalue()


def write_audio(
    path: str | Path,
    pieces: Iterable[np.ndarray],
    sample_rate: int,
    fmt: str | None = None,
    *,
    files: AtomicFiles | None = None,
    title: str | None = None,
    chapters: Sequence[Chapter] = (),
) -> None:
    """``pieces`` one after another as the file ``path``, in ``fmt`` (default: the one its suffix names). Written
    to a temp name: renamed at once, or with the rest of ``files`` when its owner commits them."""
    fmt = fmt or format_of(path)
    if files is None:
        with AtomicFiles() as files:
            write_audio(path, pieces, sample_rate, fmt, files=files, title=title, chapters=chapters)
        return
    with files.open(path) as out:
        encoder = AudioEncoder(out, fmt, sample_rate, title=title, chapters=chapters)
        for piece in pieces:
            encoder.write(piece)
        encoder.close()


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


class StreamEncoder:
    """A response's encoder: ``encode`` returns the bytes each chunk made (the muxer's so far), ``finish`` the
    tail. ``seekable=True`` (a whole response): nothing until ``finish``, which returns the file with exact
    headers (WAV's and FLAC's sizes)."""

    def __init__(self, fmt: str, sample_rate: int, seekable: bool = False) -> None:
        check_format(fmt, seekable=seekable)
        if not seekable and not FORMATS[fmt].streams:
            raise InvalidInputError(f"{fmt} cannot be streamed: its index is written last")
        self._sink = io.BytesIO() if seekable else _Sink()
        self._encoder = AudioEncoder(self._sink, fmt, sample_rate)

    def encode(self, audio: np.ndarray) -> bytes:
        self._encoder.write(audio)
        return self._sink.take() if isinstance(self._sink, _Sink) else b""

    def finish(self) -> bytes:
        self._encoder.close()
        return self._sink.take() if isinstance(self._sink, _Sink) else self._sink.getvalue()
