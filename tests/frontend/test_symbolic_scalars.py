"""Python arithmetic on symbolic sizes (sym_float, truediv, trunc, floor, ceil,
sym_max, sym_min) and tensors combined with a symbolic size, against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402


class Sizes(torch.nn.Module):
    """Sizes computed in Python from a dynamic length, each used as a size or a scale."""

    def forward(self, x):
        t = x.shape[1]
        return (
            F.interpolate(x[None], scale_factor=0.5, mode="nearest"),  # sym_float, trunc, truediv
            F.interpolate(x[None], scale_factor=1.5, mode="linear"),  # sym_float, mul, trunc
            torch.arange(math.trunc(t / 2)),  # truediv of two ints, trunc
            x.new_ones(math.floor(t * 1.5)),
            x.new_ones(math.ceil(t / 3)),
            x / t,  # a float tensor and an int64 size
            x * (t / 2),  # a float tensor and a float64 size
            (x * 4).long() * (t / 2),  # an int tensor and a float size: float32, as in torch
            x.new_ones(max(t, 7)),  # sym_max
            x.new_ones(min(t, 7)),  # sym_min
            # A slice of a computed size: its shape, recorded by torch as
            # FloorToInt(1.5*ToFloat(s)) - 1, maps back to the PrimExpr the graph computed.
            torch.arange(math.floor(t * 1.5))[1:].reshape(-1, 1),
        )


T = torch.export.Dim("T", min=4, max=256)


@pytest.fixture(scope="module")
def exported():
    return torch.export.export(Sizes(), (torch.randn(2, 8),), dynamic_shapes=({1: T},))


def test_export_records_python_functions(exported):
    """The node targets torch 2.15 records (TVM keys nodes by ``target.__name__``)."""
    import operator

    targets = {n.target for n in exported.run_decompositions().graph.nodes if n.op == "call_function"}
    assert {torch.sym_float, math.trunc, math.floor, math.ceil, operator.truediv} <= targets
    assert {torch.sym_max, torch.sym_min} <= targets


def test_sizes_match_torch_at_three_lengths(exported):
    mod = kokoro_tvm_ext.from_exported_program(exported)
    for field in mod["main"].ret_ty.fields:
        assert field.shape is not None, f"shape lost: {field}"
    vm = build_vm(mod)
    for n in (4, 9, 33):
        x = torch.randn(2, n)
        for got, want in zip(run_vm(vm, x.numpy()), Sizes()(x)):
            want = want.numpy()
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_stock_tvm_has_no_converters(exported):
    from tvm.relax.frontend.torch import from_exported_program

    with pytest.raises(AssertionError, match="Unsupported function types") as err:
        from_exported_program(exported)
    for name in ("sym_float", "truediv", "trunc", "floor", "ceil", "sym_max", "sym_min"):
        assert f"'{name}'" in str(err.value)
