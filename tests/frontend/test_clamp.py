"""clamp converters against torch, including integer tensors with a missing bound."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import export_and_build, run_vm  # noqa: E402


class Clamp(torch.nn.Module):
    def __init__(self, lo, hi):
        super().__init__()
        self.lo, self.hi = lo, hi

    def forward(self, x):
        return torch.clamp(x, min=self.lo, max=self.hi)


T = torch.export.Dim("T", min=1, max=4096)


@pytest.mark.parametrize(
    "dtype,lo,hi",
    [
        (torch.int64, 0, None),  # stock TVM: "Cannot convert infinity to BigInt"
        (torch.int64, None, 3),
        (torch.int32, -2, 5),
        (torch.float32, -0.5, None),
        (torch.float32, None, 0.25),
        (torch.int64, 0.5, None),  # torch promotes to float32
    ],
)
def test_clamp_scalar_bounds_match_torch_at_two_lengths(dtype, lo, hi):
    model = Clamp(lo, hi)
    example = (torch.arange(-5, 6).to(dtype),)
    vm, _ = export_and_build(model, example, dynamic_shapes=({0: T},))
    for n in (1, 37):
        x = (torch.randn(n) * 10).to(dtype)
        want = model(x).numpy()
        got = run_vm(vm, x.numpy())
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_clamp_min_with_tensor_bound():
    class M(torch.nn.Module):
        def forward(self, x, lo):
            return torch.clamp_min(x, lo)

    x = torch.tensor([[-3, 0, 4], [7, -1, 2]], dtype=torch.int64)
    lo = torch.tensor([0, 1, 5], dtype=torch.int64)
    vm, _ = export_and_build(M(), (x, lo))
    np.testing.assert_array_equal(run_vm(vm, x.numpy(), lo.numpy()), M()(x, lo).numpy())


def test_clamp_int_min_only_builds_where_stock_tvm_fails():
    """The bug our converter fixes is real: stock conversion cannot build it."""
    import tvm
    from tvm.relax.frontend.torch import from_exported_program

    ep = torch.export.export(Clamp(0, None), (torch.arange(-3, 3),))
    with pytest.raises(Exception, match="infinity"):
        tvm.compile(from_exported_program(ep), target="llvm")


def test_clamp_with_a_symbolic_size_bound():
    """A bound computed from the input's symbolic length, e.g. ``x.shape[0] - 8``."""

    class SizeBound(torch.nn.Module):
        def forward(self, x):
            return torch.clamp(x, max=x.shape[0] - 8)

    vm, _ = export_and_build(SizeBound(), (torch.arange(20),), dynamic_shapes=({0: T},))
    for n in (3, 20, 57):
        x = torch.arange(n) * 3 - 10
        np.testing.assert_array_equal(run_vm(vm, x.numpy()), SizeBound()(x).numpy())
