"""The encoder's input: a 16 kHz waveform -> power mel spectrogram frames (numpy), and its 1.6 s partial windows.

As Resemblyzer computes them (its audio.py, through librosa 0.10+): a periodic Hann window of 400 samples, hop
160, the signal zero-padded by 200 samples at each end (librosa's ``center=True``, ``pad_mode="constant"``), the
power spectrum (not its log) projected on 40 mel filters on Slaney's mel scale with Slaney's area normalisation,
0 Hz to 8 kHz. The partial windows follow ``VoiceEncoder.compute_partial_slices`` (rate 1.3 per second, a last
window kept when at least 75% of it is audio).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from kokoro_tvm_ext.model.speaker_encoder.spec import (
    HOP,
    MIN_COVERAGE,
    N_MELS,
    PARTIAL_FRAMES,
    PARTIALS_PER_SECOND,
    SAMPLE_RATE,
    WINDOW,
)


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's scale: linear (3 per 200 Hz) below 1 kHz, logarithmic (27 steps per factor 6.4) above."""
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / (200.0 / 3)
    log = 15.0 + np.log(np.maximum(hz, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(hz >= 1000.0, log, linear)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    return np.where(mel >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel - 15.0)), mel * (200.0 / 3))


@lru_cache(maxsize=1)
def mel_filters() -> np.ndarray:
    """[40, 201]: triangles between adjacent mel points, each scaled to unit area (2 / its width in Hz)."""
    bins = np.linspace(0.0, SAMPLE_RATE / 2, WINDOW // 2 + 1)
    points = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), N_MELS + 2))
    widths = np.diff(points)
    rising = (bins[None, :] - points[:-2, None]) / widths[:-1, None]
    falling = (points[2:, None] - bins[None, :]) / widths[1:, None]
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    return triangles * (2.0 / (points[2:] - points[:-2]))[:, None]


@lru_cache(maxsize=1)
def _window() -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / WINDOW)  # periodic Hann


# Frames transformed at a time: the float64 spectrum of an hour of audio at once would take 1.2 GB.
BLOCK_FRAMES = 8192


def mel_spectrogram(wav: np.ndarray) -> np.ndarray:
    """[frames, 40] float32 power mel spectrogram of a 16 kHz waveform; frames = 1 + len(wav) // 160."""
    padded = np.pad(np.asarray(wav, dtype=np.float64), WINDOW // 2)
    frames = np.lib.stride_tricks.sliding_window_view(padded, WINDOW)[::HOP]  # a view: nothing copied yet
    out = np.empty((len(frames), N_MELS), np.float32)
    for start in range(0, len(frames), BLOCK_FRAMES):
        spectrum = np.fft.rfft(frames[start : start + BLOCK_FRAMES] * _window(), axis=1)
        out[start : start + BLOCK_FRAMES] = (spectrum.real**2 + spectrum.imag**2) @ mel_filters().T
    return out


def partial_starts(n_samples: int) -> list[int]:
    """The first mel frame of each 160-frame partial window over ``n_samples`` samples of audio."""
    n_frames = int(np.ceil((n_samples + 1) / HOP))
    step = int(np.round(SAMPLE_RATE / PARTIALS_PER_SECOND / HOP))
    starts = list(range(0, max(1, n_frames - PARTIAL_FRAMES + step + 1), step))
    coverage = (n_samples - starts[-1] * HOP) / (PARTIAL_FRAMES * HOP)
    if coverage < MIN_COVERAGE and len(starts) > 1:
        starts.pop()
    return starts


def partials(wav: np.ndarray) -> np.ndarray:
    """[n, 160, 40] float32: the mel spectrogram of each partial window of ``wav`` (zero-padded to cover the last)."""
    starts = partial_starts(len(wav))
    end = (starts[-1] + PARTIAL_FRAMES) * HOP
    if end >= len(wav):
        wav = np.pad(wav, (0, end - len(wav)))
    mel = mel_spectrogram(wav)
    return np.stack([mel[s : s + PARTIAL_FRAMES] for s in starts])
