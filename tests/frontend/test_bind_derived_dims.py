"""BindDerivedInputDims: inputs whose dims are only derived (2*T, 2*T + 1) build and match torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.plugin.frontend.bind_derived_dims import BindDerivedInputDims  # noqa: E402

T = torch.export.Dim("T", min=2, max=64)


class Derived(torch.nn.Module):
    """F0 at twice the frame rate and a padded signal; T itself is no input's dim."""

    def forward(self, f0, padded):
        frames = f0.reshape(1, -1, 2).mean(-1)  # [1, T]
        return frames * padded[:, 1:], frames.shape[1] + torch.zeros(1)


@pytest.fixture(scope="module")
def exported():
    example = (torch.randn(1, 10), torch.randn(1, 6))
    return torch.export.export(Derived(), example, dynamic_shapes=({1: 2 * T}, {1: T + 1}))


def test_derived_input_dims_build_and_match_torch(exported):
    mod = kokoro_tvm_ext.from_exported_program(exported)  # runs the pass
    bounds = mod["main"].attrs["tir_var_upper_bound"]
    assert int(bounds["f0_dim1"]) == 128 and int(bounds["padded_dim1"]) == 65
    vm = build_vm(mod)
    for t in (2, 5, 64):
        f0, padded = torch.randn(1, 2 * t), torch.randn(1, t + 1)
        for got, want in zip(run_vm(vm, f0.numpy(), padded.numpy()), Derived()(f0, padded)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)
    # Shapes that break the relation fail the entry check, as any shape mismatch does.
    with pytest.raises(Exception, match="mismatch"):
        run_vm(vm, np.zeros((1, 8), np.float32), np.zeros((1, 6), np.float32))


def test_stock_vm_shape_lower_fails():
    """The failure the pass fixes (NOTES §2), with stock TVM alone."""
    from tvm.relax.frontend.torch import from_exported_program

    class Double(torch.nn.Module):
        def forward(self, f0):
            return f0 * 2

    ep = torch.export.export(Double(), (torch.randn(1, 10),), dynamic_shapes=({1: 2 * T},))
    with pytest.raises(Exception, match=r"PrimExpr T.int64\(2\) \* s\d+ is not computed"):
        build_vm(from_exported_program(ep))
    vm = build_vm(kokoro_tvm_ext.from_exported_program(ep))
    np.testing.assert_array_equal(run_vm(vm, np.ones((1, 6), np.float32)), np.full((1, 6), 2, np.float32))


def test_no_op_when_every_dim_is_bound():
    class Both(torch.nn.Module):
        def forward(self, x, f0):
            return f0.reshape(1, -1, 2).sum(-1) + x

    example = (torch.randn(1, 5), torch.randn(1, 10))
    ep = torch.export.export(Both(), example, dynamic_shapes=({1: T}, {1: 2 * T}))
    mod = kokoro_tvm_ext.from_exported_program(ep)
    assert BindDerivedInputDims()(mod).same_as(mod)
