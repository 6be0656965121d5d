"""The conv-based STFT / iSTFT equals torch.stft / torch.istft, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

from kokoro_tvm_ext.model.adapters.stft import ConvSTFT  # noqa: E402

N_FFT, HOP = 20, 5  # Kokoro-82M's gen_istft_n_fft / gen_istft_hop_size


def _window(dtype):
    return torch.hann_window(N_FFT, periodic=True, dtype=torch.float32).to(dtype)


def _torch_stft(x):
    return torch.stft(x, N_FFT, HOP, N_FFT, window=_window(x.dtype), return_complex=True)


def _torch_istft(mag, phase):
    return torch.istft(mag * torch.exp(phase * 1j), N_FFT, HOP, N_FFT, window=_window(mag.dtype)).unsqueeze(-2)


def _wrapped(d):
    return torch.remainder(d + torch.pi, 2 * torch.pi) - torch.pi


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_forward_equals_torch_stft(dtype, tol):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 600 * 7 + 5, generator=gen, dtype=dtype)  # any length, not only whole frames
    stft = ConvSTFT(N_FFT, HOP)
    ref = _torch_stft(x)
    re, im = stft.spectrum(x)
    assert re.shape == ref.shape
    scale = ref.abs().max().item()
    assert (re - ref.real).abs().max().item() <= tol * scale
    assert (im - ref.imag).abs().max().item() <= tol * scale
    mag, phase = stft.transform(x)
    assert (mag - ref.abs()).abs().max().item() <= tol * scale
    # Phase is only defined where the magnitude is not rounding noise.
    solid = ref.abs() > 1e-3 * scale
    assert _wrapped(phase - ref.angle())[solid].abs().max().item() <= 100 * tol


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_inverse_equals_torch_istft(dtype, tol):
    gen = torch.Generator().manual_seed(1)
    frames = 120 * 5 + 1
    # What Kokoro feeds it: exp() of a log-magnitude and sin() of a phase.
    mag = torch.exp(torch.randn(2, N_FFT // 2 + 1, frames, generator=gen, dtype=dtype))
    phase = torch.sin(3 * torch.randn(2, N_FFT // 2 + 1, frames, generator=gen, dtype=dtype))
    want = _torch_istft(mag, phase)
    got = ConvSTFT(N_FFT, HOP).inverse(mag, phase)
    assert got.shape == want.shape == (2, 1, HOP * (frames - 1))
    assert (got - want).abs().max().item() <= tol * want.abs().max().item()


def test_round_trip_reconstructs_the_signal():
    x = torch.randn(1, 3000, dtype=torch.float64)
    stft = ConvSTFT(N_FFT, HOP)
    y = stft.inverse(*stft.transform(x))
    np.testing.assert_allclose(y[0, 0].numpy(), x[0].numpy(), atol=1e-12)


class _Both(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stft = ConvSTFT(N_FFT, HOP)

    def forward(self, x, mag, phase):
        m, p = self.stft.transform(x.reshape(x.shape[0], -1))  # x is [B, frames, hop]
        return m, p, self.stft.inverse(mag, phase)


def test_compiled_stft_matches_torch_at_two_lengths():
    """The formulation compiles with a symbolic length and still equals torch."""
    T = torch.export.Dim("T", min=3, max=4096)  # reflect padding needs 5·T > 10
    U = torch.export.Dim("U", min=2, max=4096)
    example = (torch.randn(1, 20, HOP), torch.rand(1, 11, 21), torch.randn(1, 11, 21))
    ep = torch.export.export(_Both(), example, dynamic_shapes=({1: T}, {2: U}, {2: U}))
    import kokoro_tvm_ext

    vm = build_vm(kokoro_tvm_ext.from_exported_program(ep))
    gen = torch.Generator().manual_seed(2)
    for frames in (8, 61):
        x = torch.randn(1, HOP * frames, generator=gen)
        mag = torch.exp(torch.randn(1, 11, frames + 1, generator=gen))
        phase = torch.sin(3 * torch.randn(1, 11, frames + 1, generator=gen))
        m, p, y = run_vm(vm, x.reshape(1, frames, HOP).numpy(), mag.numpy(), phase.numpy())
        ref = _torch_stft(x)
        scale = ref.abs().max().item()
        assert np.abs(m - ref.abs().numpy()).max() <= 1e-5 * scale
        solid = (ref.abs() > 1e-3 * scale).numpy()
        assert np.abs(_wrapped(torch.from_numpy(p) - ref.angle()).numpy()[solid]).max() <= 1e-3
        want = _torch_istft(mag, phase).numpy()
        assert y.shape == want.shape
        assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
