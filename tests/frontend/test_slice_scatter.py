"""slice_scatter (slice assignment) with symbolic lengths and bounds, against torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402


class Assign(torch.nn.Module):
    """Each assignment exports as one aten.slice_scatter on the dynamic axis."""

    def forward(self, x, y):
        out = x.clone()
        out[:, 1 : 1 + y.shape[1]] = y  # end is another input's size
        out[:, -2:] = 0.0  # negative start
        out[:, ::3] = out[:, ::3] * 2  # a step
        out[:, -5:-1] += 1.0  # negative start and end
        return out


T = torch.export.Dim("T", min=5, max=64)
U = torch.export.Dim("U", min=1, max=3)
EXAMPLE = (torch.randn(2, 8), torch.randn(2, 2))


@pytest.fixture(scope="module")
def exported():
    return torch.export.export(Assign(), EXAMPLE, dynamic_shapes=({1: T}, {1: U}))


def test_symbolic_slice_scatter_matches_torch(exported):
    targets = [n.target for n in exported.run_decompositions().graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten.slice_scatter.default) >= 4
    vm = build_vm(kokoro_tvm_ext.from_exported_program(exported))
    for n, u in ((5, 1), (9, 2), (37, 3)):
        x, y = torch.randn(2, n), torch.randn(2, u)
        np.testing.assert_array_equal(run_vm(vm, x.numpy(), y.numpy()), Assign()(x, y).numpy())


def test_static_slice_scatter_still_matches_torch():
    vm = build_vm(kokoro_tvm_ext.from_exported_program(torch.export.export(Assign(), EXAMPLE)))
    np.testing.assert_array_equal(run_vm(vm, *(a.numpy() for a in EXAMPLE)), Assign()(*EXAMPLE).numpy())


def test_stock_legalization_needs_constants(exported):
    """TVM's own FLegalize (still importable) fails where ours is registered over it."""
    from tvm import relax
    from tvm.relax.transform.legalize_ops.manipulate import _slice_scatter as stock_legalize

    mod = kokoro_tvm_ext.from_exported_program(exported)
    with pytest.raises(ValueError, match="Expect value to be constant int"):
        relax.transform.LegalizeOps(customize_legalize_map={"relax.slice_scatter": stock_legalize})(mod)
