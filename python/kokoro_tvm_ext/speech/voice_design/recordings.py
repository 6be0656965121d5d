"""Recordings of the voice to design: decoded (any format and rate PyAV reads), checked, at the encoder's rate.

Bounded on purpose: only the first ``MAX_SECONDS`` of a file are read (a 2-hour file costs what 10 minutes do; the
speaker encoder averages over the speech, so more of one voice changes little); a file recorded below
``MIN_RATE`` is refused (the encoder hears up to 8 kHz: a telephone recording lacks half of what it compares);
silence and less than ``MIN_SPEECH_SECONDS`` of speech are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.support.errors import InvalidInputError
from kokoro_tvm_ext.support.file_hash import file_sha256

RATE = 16000  # what the speaker encoder takes
MIN_RATE = 16000
MAX_SECONDS = 600.0
MIN_SPEECH_SECONDS = 3.0
_FRAME = 0.03  # seconds per loudness frame
_SPEECH_DBFS = -45.0  # a frame louder than this (RMS) is counted as speech


@dataclass(frozen=True)
class Recording:
    """One recording: its path and sha256, its audio (mono float32 at ``RATE``, at most ``MAX_SECONDS``), the rate
    it was recorded at, and the seconds of it loud enough to be speech."""

    path: Path
    sha256: str
    audio: np.ndarray = field(repr=False)
    source_rate: int
    speech_seconds: float
    truncated: bool


def read_recordings(paths) -> list[Recording]:
    """Each of ``paths`` read (``read_recording``, each at least ``MIN_SPEECH_SECONDS`` when alone); several short
    clips of one voice pass when their speech adds up to ``MIN_SPEECH_SECONDS``."""
    paths = list(paths)
    if len(paths) == 1:
        return [read_recording(paths[0])]
    recs = [read_recording(p, min_speech=0.0) for p in paths]
    total = sum(r.speech_seconds for r in recs)
    if total < MIN_SPEECH_SECONDS:
        raise InvalidInputError(
            f"the {len(recs)} recordings hold {total:.1f} s of speech together; give at least {MIN_SPEECH_SECONDS:g} s"
        )
    return recs


def read_recording(path: str | Path, min_speech: float = MIN_SPEECH_SECONDS) -> Recording:
    """``path`` decoded and checked; InvalidInputError (one line naming the file and the fix) when it is not audio,
    was recorded below ``MIN_RATE``, is silent or holds less than ``min_speech`` seconds of speech."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"recording {path}: no such file")
    audio, source_rate, truncated = _decode(path)
    if source_rate < MIN_RATE:
        raise InvalidInputError(
            f"recording {path.name} is sampled at {source_rate} Hz; the speaker encoder needs at least {MIN_RATE} Hz "
            "(a telephone-quality recording lacks the upper half of what it compares): use a 16 kHz or better one"
        )
    speech = speech_seconds(audio)
    if speech == 0.0:
        raise InvalidInputError(f"recording {path.name} is silent (nothing louder than {_SPEECH_DBFS:g} dBFS)")
    if speech < min_speech:
        raise InvalidInputError(
            f"recording {path.name} holds {speech:.1f} s of speech; give at least {min_speech:g} s "
            "(10 s or more of one speaker works best)"
        )
    return Recording(path, file_sha256(path), audio, source_rate, speech, truncated)


def speech_seconds(audio: np.ndarray, rate: int = RATE) -> float:
    """Seconds of ``audio`` in frames louder than ``_SPEECH_DBFS``."""
    n = int(rate * _FRAME)
    frames = len(audio) // n
    if frames == 0:
        return 0.0
    rms = np.sqrt(np.mean(audio[: frames * n].reshape(frames, n).astype(np.float64) ** 2, axis=1))
    return float(np.count_nonzero(rms > 10 ** (_SPEECH_DBFS / 20)) * _FRAME)


def _decode(path: Path) -> tuple[np.ndarray, int, bool]:
    """Mono float32 at ``RATE`` of the first ``MAX_SECONDS``, the stream's own rate, whether it was cut."""
    import av

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError, ValueError) as err:
        raise InvalidInputError(f"recording {path.name} is not audio PyAV can read ({_reason(err)})") from None
    with container:
        streams = container.streams.audio
        if not streams:
            raise InvalidInputError(f"recording {path.name} has no audio stream")
        stream = streams[0]
        source_rate = int(stream.codec_context.sample_rate or stream.rate or 0)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        pieces, total, limit, truncated = [], 0, int(MAX_SECONDS * RATE), False
        try:
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    pieces.append(out.to_ndarray().reshape(-1))
                    total += pieces[-1].size
                if total >= limit:
                    truncated = True
                    break
            if not truncated:
                for out in resampler.resample(None):
                    pieces.append(out.to_ndarray().reshape(-1))
        except (av.error.FFmpegError, ValueError) as err:
            raise InvalidInputError(f"recording {path.name} cannot be decoded ({_reason(err)})") from None
    audio = np.concatenate(pieces).astype(np.float32)[:limit] if pieces else np.zeros(0, np.float32)
    if audio.size == 0:
        raise InvalidInputError(f"recording {path.name} holds no audio")
    return audio, source_rate, truncated


def _reason(err: Exception) -> str:
    return str(getattr(err, "strerror", None) or err).split("\n")[0][:120]
