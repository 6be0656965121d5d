"""mm / bmm / matmul / addmm / linear keep float64 (stock TVM computes them in float32)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402


class Products(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, a, b, c):
        return (
            self.lin(a),  # linear / addmm / bmm, depending on decomposition
            a @ b,  # matmul
            torch.mm(a[0], b[0]),
            torch.bmm(a, b),
            torch.addmm(c, a[0], b[0], beta=0.5, alpha=2.0),
        )


def _close(got, want, tol):
    scale = max(1.0, float(np.abs(want).max()))
    assert got.dtype == want.dtype
    assert np.abs(got - want).max() <= tol * scale


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-13), (torch.float32, 1e-5)])
def test_products_keep_dtype(dtype, tol):
    model = Products().to(dtype)
    args = (torch.randn(2, 4, 5, dtype=dtype), torch.randn(2, 5, 3, dtype=dtype), torch.randn(4, 3, dtype=dtype))
    ep = torch.export.export(model, args)
    vm = build_vm(kokoro_tvm_ext.from_exported_program(ep))
    for got, want in zip(run_vm(vm, *[a.numpy() for a in args]), model(*args)):
        _close(got, want.detach().numpy(), tol)


def test_stock_bmm_loses_float64():
    from tvm.relax.frontend.torch import from_exported_program

    class Bmm(torch.nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)

    args = (torch.randn(1, 30, 40, dtype=torch.float64), torch.randn(1, 40, 20, dtype=torch.float64))
    got = run_vm(build_vm(from_exported_program(torch.export.export(Bmm(), args))), *[a.numpy() for a in args])
    want = torch.bmm(*args).numpy()
    assert got.dtype != np.float64 or np.abs(got - want).max() > 1e-12
