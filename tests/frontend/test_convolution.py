"""convolution keeps float64 (stock TVM computes it in float32)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402


class Convs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1, groups=2)
        self.c1t = torch.nn.ConvTranspose1d(6, 3, 4, stride=3, padding=1, output_padding=1)
        self.c2 = torch.nn.Conv2d(3, 2, 3, padding=1, bias=False)
        self.c2t = torch.nn.ConvTranspose2d(2, 2, 2, stride=2)
        self.c3 = torch.nn.Conv3d(2, 2, 1)

    def forward(self, x):
        y = self.c1t(self.c1(x))  # [B, 3, L']
        z = self.c2t(self.c2(y.unsqueeze(-1).expand(-1, -1, -1, 3)))
        return y, z, self.c3(z.unsqueeze(2))


def _close(got, want, tol):
    scale = max(1.0, float(np.abs(want).max()))
    assert got.dtype == want.dtype
    assert np.abs(got - want).max() <= tol * scale


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-13), (torch.float32, 1e-5)])
def test_convolutions_keep_dtype(dtype, tol):
    model = Convs().to(dtype)
    L = torch.export.Dim("L", min=4, max=256)
    ep = torch.export.export(model, (torch.randn(2, 4, 16, dtype=dtype),), dynamic_shapes=({2: L},))
    vm = build_vm(kokoro_tvm_ext.from_exported_program(ep))
    for n in (9, 31):
        x = torch.randn(2, 4, n, dtype=dtype)
        for got, want in zip(run_vm(vm, x.numpy()), model(x)):
            _close(got, want.detach().numpy(), tol)


def test_stock_conv_loses_float64():
    """What the converter fixes: stock TVM returns a float64 conv in float32 or float32 precision."""
    from tvm.relax.frontend.torch import from_exported_program

    conv = torch.nn.Conv1d(1, 1, 20, bias=False).double()
    x = torch.randn(1, 1, 200, dtype=torch.float64)
    mod = from_exported_program(torch.export.export(conv, (x,)))
    got = run_vm(build_vm(mod), x.numpy())
    want = conv(x).detach().numpy()
    assert got.dtype != np.float64 or np.abs(got - want).max() > 1e-12
