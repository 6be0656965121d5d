"""STFT / iSTFT as convolutions with a fixed DFT basis, for Kokoro's iSTFTNet.

Why this formulation
--------------------
Kokoro's ``TorchSTFT`` calls ``torch.stft`` / ``torch.istft`` on complex
tensors. Exported, that becomes ``unfold``, ``_fft_r2c``, ``_fft_c2r``,
``angle`` and complex multiplies, none of which TVM's importer handles, and
TVM has no complex dtype to lower them to. Kokoro's FFT is tiny (n_fft = 20,
hop = 5, 11 bins), so an FFT buys nothing: a direct DFT is a 1-D convolution
with 22 output channels and a 20-tap kernel. We therefore write the transform
with ops TVM already handles well, ``conv1d`` / ``conv_transpose1d`` with
constant weights, ``sqrt`` and ``atan2``, and keep everything real-valued:

* forward: reflect-pad by n_fft/2 (``center=True``), ``conv1d`` with the
  windowed basis ``w[n]·cos(2πkn/N)`` and ``-w[n]·sin(2πkn/N)`` at stride hop,
  then magnitude ``sqrt(re² + im²)`` and phase ``atan2(im, re)`` (what
  ``torch.abs`` / ``torch.angle`` give for complex input);
* inverse: ``re = mag·cos(phase)``, ``im = mag·sin(phase)``, one
  ``conv_transpose1d`` with the windowed inverse real-DFT basis (weight 1/N for
  DC and Nyquist, 2/N for the others; the imaginary parts of DC and Nyquist
  are ignored, as in ``irfft``), overlap-add at stride hop, division by the
  overlap-added squared window (the same envelope ``torch.istft`` divides by),
  and trimming n_fft/2 samples at both ends.

The bases are computed and held in float64 with the phase index reduced
exactly (``k·n mod N``), so DC/Nyquist imaginary rows are exactly zero; each
call casts them to the input's dtype, so the same module serves float32 and
float64 signals. ``tests/kokoro/test_stft.py`` checks both directions
against ``torch.stft`` / ``torch.istft`` to 1e-5.

Only fixed-size ops on a symbolic time axis are used, so the transform exports
with a symbolic length and imports into Relax without new converters.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _hann(win_length: int) -> np.ndarray:
    # Kokoro builds its window as float32; use those exact values.
    return torch.hann_window(win_length, periodic=True, dtype=torch.float32).double().numpy()


def dft_bases(n_fft: int, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forward and inverse real-DFT bases, windowed, float64.

    Returns ``(forward, inverse)``, both of shape ``[2K, 1, n_fft]`` with
    K = n_fft // 2 + 1; rows 0..K-1 are the real parts, rows K..2K-1 the
    imaginary parts.
    """
    k = np.arange(n_fft // 2 + 1)
    n = np.arange(n_fft)
    # Reduce k·n mod N in integers so that multiples of π/2 are exact.
    angle = 2.0 * np.pi * (np.outer(k, n) % n_fft) / n_fft
    cos, sin = np.cos(angle), np.sin(angle)
    quarter = (4 * (np.outer(k, n) % n_fft)) % n_fft == 0  # angle is a multiple of π/2
    cos[quarter], sin[quarter] = np.round(cos[quarter]), np.round(sin[quarter])

    forward = np.concatenate([cos * window, -sin * window])[:, None, :]

    scale = np.full(len(k), 2.0 / n_fft)
    scale[0] = 1.0 / n_fft
    if n_fft % 2 == 0:
        scale[-1] = 1.0 / n_fft
    inv_sin = -sin * scale[:, None]
    inv_sin[0] = 0.0  # irfft ignores Im(X_0) ...
    if n_fft % 2 == 0:
        inv_sin[-1] = 0.0  # ... and Im(X_{N/2})
    inverse = np.concatenate([cos * scale[:, None] * window, inv_sin * window])[:, None, :]
    return forward, inverse


class ConvSTFT(nn.Module):
    """Drop-in for Kokoro's ``TorchSTFT`` (``transform`` / ``inverse``), real-valued."""

    def __init__(self, filter_length: int = 20, hop_length: int = 5, win_length: int | None = None):
        super().__init__()
        win_length = filter_length if win_length is None else win_length
        if win_length != filter_length:
            raise NotImplementedError("ConvSTFT needs win_length == filter_length (Kokoro's case)")
        self.n_fft = filter_length
        self.hop = hop_length
        self.bins = filter_length // 2 + 1
        window = _hann(win_length)
        forward, inverse = dft_bases(filter_length, window)
        self.register_buffer("forward_basis", torch.tensor(forward, dtype=torch.float64))
        self.register_buffer("inverse_basis", torch.tensor(inverse, dtype=torch.float64))
        self.register_buffer("window_sq", torch.tensor(window**2, dtype=torch.float64).view(1, 1, -1))

    def spectrum(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Real and imaginary parts of ``torch.stft(x, center=True)``: [B, K, frames]."""
        pad = self.n_fft // 2
        x = F.pad(x.unsqueeze(1), (pad, pad), mode="reflect")
        spec = F.conv1d(x, self.forward_basis.to(x.dtype), stride=self.hop)
        return spec[:, : self.bins], spec[:, self.bins :]

    def transform(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T] signal → magnitude and phase, each [B, K, T // hop + 1]."""
        re, im = self.spectrum(x)
        return torch.sqrt(re * re + im * im), torch.atan2(im, re)

    def inverse_complex(self, re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
        """``torch.istft(re + i·im, center=True)`` as [B, 1, hop·(frames-1)]."""
        frames = re.shape[-1]
        y = F.conv_transpose1d(torch.cat([re, im], dim=1), self.inverse_basis.to(re.dtype), stride=self.hop)
        ones = torch.ones_like(re[:1, :1, :])
        envelope = F.conv_transpose1d(ones, self.window_sq.to(re.dtype), stride=self.hop)
        pad = self.n_fft // 2
        y = y / envelope
        return y[:, :, pad : pad + self.hop * (frames - 1)]

    def inverse(self, magnitude: torch.Tensor, phase: torch.Tensor) -> torch.Tensor:
        """Kokoro's ``TorchSTFT.inverse``: istft of ``magnitude·e^{i·phase}``, [B, 1, T]."""
        return self.inverse_complex(magnitude * torch.cos(phase), magnitude * torch.sin(phase))


class TorchSTFT(nn.Module):
    """Kokoro's ``TorchSTFT`` with the window cast to the input dtype (float64 references)."""

    def __init__(self, filter_length: int = 20, hop_length: int = 5, win_length: int | None = None):
        super().__init__()
        self.n_fft = filter_length
        self.hop = hop_length
        self.win_length = filter_length if win_length is None else win_length
        self.window = torch.hann_window(self.win_length, periodic=True, dtype=torch.float32)

    def _window(self, like: torch.Tensor) -> torch.Tensor:
        return self.window.to(device=like.device, dtype=like.dtype)

    def transform(self, x):
        spec = torch.stft(x, self.n_fft, self.hop, self.win_length, window=self._window(x), return_complex=True)
        return torch.abs(spec), torch.angle(spec)

    def inverse(self, magnitude, phase):
        y = torch.istft(
            magnitude * torch.exp(phase * 1j), self.n_fft, self.hop, self.win_length, window=self._window(magnitude)
        )
        return y.unsqueeze(-2)
