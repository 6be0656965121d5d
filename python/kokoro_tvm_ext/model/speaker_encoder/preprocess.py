"""A recording -> the waveform the encoder hears: mono float32 at 16 kHz, quiet audio raised to -30 dBFS, long
silences cut (Resemblyzer's ``preprocess_wav``).

Resampling is FFmpeg's libswresample through PyAV (the [speak] extra's audio library). The silence trim keeps
Resemblyzer's smoothing (voice flags per 30 ms window, a moving average over 8 windows, rounded, voiced runs
widened by 3 windows on each side, the tail beyond the last whole window dropped) but flags a window as voiced by
its energy instead of WebRTC's voice detector (a C extension): louder than -45 dBFS and within 40 dB of the
loudest window, or within 3 windows after one (WebRTC's hangover). Chosen against WebRTC's flags (mode 3) on
the tests' speech: the kept samples agree on 98% of the windows (94% without the hangover). The two differ in the
windows they cut at the edges of pauses; the embeddings' cosine difference this causes is in docs/plugin.md.
"""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.model.speaker_encoder.spec import (
    SAMPLE_RATE,
    TARGET_DBFS,
    VAD_MAX_SILENCE,
    VAD_SMOOTHING,
    VAD_WINDOW,
)
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError

INT16_MAX = 2**15 - 1
VOICED_FLOOR_DBFS = -45.0
VOICED_RANGE_DB = 40.0
# WebRTC's detector keeps calling speech for a few windows after the energy falls (its hangover).
VOICED_HANGOVER = 3


def as_mono(wav) -> np.ndarray:
    """``wav`` as a 1-D float32 array of finite samples; the channels of a 2-D array averaged."""
    wav = np.asarray(wav)
    if wav.dtype.kind not in "fiu":
        raise InvalidInputError(f"audio must be numbers, got dtype {wav.dtype}")
    if wav.dtype.kind in "iu":  # PCM integers: full scale -> 1.0
        wav = wav.astype(np.float64) / float(np.iinfo(wav.dtype).max)
    if wav.ndim == 2:
        wav = wav.mean(axis=int(np.argmin(wav.shape)))
    if wav.ndim != 1:
        raise InvalidInputError(f"audio must be 1-D (or 2-D with channels), got shape {wav.shape}")
    wav = wav.astype(np.float32)
    if not np.isfinite(wav).all():
        raise InvalidInputError("audio contains NaN or infinity")
    return wav


def resample(wav: np.ndarray, sample_rate: int) -> np.ndarray:
    """``wav`` at 16 kHz (libswresample, through PyAV)."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) or sample_rate < 1000:
        raise InvalidInputError(f"sample_rate must be an integer number of Hz (>= 1000), got {sample_rate!r}")
    if sample_rate == SAMPLE_RATE or wav.size == 0:
        return wav
    try:
        import av
    except ImportError:
        raise MissingAssetError(
            f"audio at {sample_rate} Hz needs resampling to {SAMPLE_RATE} Hz with PyAV: "
            'pip install "kokoro-tvm-ext[design]"'
        ) from None
    frame = av.AudioFrame.from_ndarray(wav[None, :], format="flt", layout="mono")
    frame.sample_rate = int(sample_rate)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    pieces = [f.to_ndarray()[0] for f in (*resampler.resample(frame), *resampler.resample(None))]
    return np.concatenate(pieces).astype(np.float32) if pieces else np.zeros(0, np.float32)


def normalize_volume(wav: np.ndarray) -> np.ndarray:
    """``wav`` raised to -30 dBFS RMS if quieter (louder audio is left as it is)."""
    rms = float(np.sqrt(np.mean(np.square(wav, dtype=np.float64)))) if wav.size else 0.0
    if rms == 0.0:
        raise InvalidInputError("the audio is silent (every sample is 0): there is no voice to embed")
    change_db = TARGET_DBFS - 20 * np.log10(rms)
    return wav if change_db < 0 else (wav * 10 ** (change_db / 20)).astype(np.float32)


def voiced_windows(wav: np.ndarray) -> np.ndarray:
    """A flag per whole 30 ms window: loud enough to be voice (see the module's doc)."""
    windows = wav[: len(wav) - len(wav) % VAD_WINDOW].reshape(-1, VAD_WINDOW).astype(np.float64)
    # As 16-bit PCM, as the voice detector hears it: a window of rounding noise is silence.
    pcm = np.round(windows * INT16_MAX) / INT16_MAX
    level = 10 * np.log10(np.maximum(np.mean(pcm**2, axis=1), 1e-20))
    if level.size == 0:
        return np.zeros(0, bool)
    loud = (level > VOICED_FLOOR_DBFS) & (level > level.max() - VOICED_RANGE_DB)
    flags = loud.copy()
    for lag in range(1, VOICED_HANGOVER + 1):
        flags[lag:] |= loud[:-lag]
    return flags


def keep_mask(flags: np.ndarray) -> np.ndarray:
    """Resemblyzer's smoothing of per-window voice flags: moving average over 8, rounded, dilated by 3 each side."""
    flags = flags.astype(np.float64)
    padded = np.concatenate([np.zeros((VAD_SMOOTHING - 1) // 2), flags, np.zeros(VAD_SMOOTHING // 2)])
    smoothed = np.convolve(padded, np.ones(VAD_SMOOTHING) / VAD_SMOOTHING, mode="valid")
    voiced = np.round(smoothed) > 0  # round half to even, as numpy's round is: 0.5 -> 0
    # scipy's binary_dilation with a structure of VAD_MAX_SILENCE + 1 ones, centred, zeros beyond the ends
    return np.convolve(voiced.astype(np.float64), np.ones(VAD_MAX_SILENCE + 1), mode="same") > 0.5


def trim_silences(wav: np.ndarray, flags: np.ndarray | None = None) -> np.ndarray:
    """``wav`` without its long silences; ``flags``: per-window voice flags (default :func:`voiced_windows`)."""
    flags = voiced_windows(wav) if flags is None else flags
    mask = np.repeat(keep_mask(flags), VAD_WINDOW)
    return wav[: len(mask)][mask]


def preprocess(wav, sample_rate: int, trim: bool = True) -> np.ndarray:
    """``wav`` (any rate, mono or channels) as the encoder hears it: 16 kHz, volume normalised, silences trimmed
    unless ``trim=False`` (audio without pauses to cut, such as Kokoro's)."""
    wav = normalize_volume(resample(as_mono(wav), sample_rate))
    return trim_silences(wav) if trim else wav
