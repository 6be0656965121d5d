"""The f32 matmul on weights packed at compile time (``pack_f32`` + ``matmul_panels``), through TVM:
against float64 numpy and torch's linear layers compiled by our pipeline, in every precision."""

from __future__ import annotations

import numpy as np
import pytest
import tvm

import kokoro_tvm_ext._native  # noqa: F401  (the kernels)

pack = tvm.get_global_func("kokoro_tvm_ext.pack_f32")
matmul_panels = tvm.get_global_func("kokoro_tvm_ext.matmul_panels")


@pytest.mark.parametrize("rows,k,n", [(1, 1, 1), (50, 768, 130), (7, 300, 64), (311, 65, 33)])
def test_matmul_panels_equals_the_float64_product(rng, rows, k, n):
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    packed = pack("matmul", 1, tvm.runtime.tensor(w))
    assert packed.shape == (-(-n // 64), k, 64)
    out = tvm.runtime.tensor(np.full((rows, n), np.nan, np.float32))
    matmul_panels(1, tvm.runtime.tensor(x), packed, tvm.runtime.tensor(bias), out)
    want = x.astype(np.float64) @ w.astype(np.float64) + bias
    scale = np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64) + np.abs(bias)
    assert np.all(np.abs(out.numpy() - want) <= 1e-6 * (1 + scale))


def test_weights_packed_for_another_shape_are_refused_with_the_packer_named(rng):
    packed = pack("matmul", 1, tvm.runtime.tensor(np.ones((3, 4), np.float32)))
    out = tvm.runtime.tensor(np.zeros((2, 70), np.float32))
    with pytest.raises(ValueError, match=r"matmul_panels: w: expected shape \[2, 3, 64\].*pack_f32"):
        matmul_panels(0, tvm.runtime.tensor(np.ones((2, 3), np.float32)), packed, out)
    with pytest.raises(ValueError, match='pack_f32: kind: only "matmul"'):
        pack("conv1d", 1, tvm.runtime.tensor(np.ones((2, 3, 3), np.float32)))


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_linear_layers_compile_to_the_panel_kernel_and_match_torch(precision):
    """Two torch Linear layers through the whole pipeline, a symbolic row count: in fp32 both become
    the panel kernel; in int8 the wide one goes int8 and the narrow one (fewer than 32 channels,
    which int8 keeps f32) the panel kernel. The f32 products equal torch's in float64."""
    torch = pytest.importorskip("torch")
    from tvm import relax

    import kokoro_tvm_ext
    from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(48, 40), torch.nn.Tanh(), torch.nn.Linear(40, 16)).eval()
    rows = torch.export.Dim("rows", min=1, max=1024)
    ep = torch.export.export(model, (torch.randn(9, 48),), dynamic_shapes=({0: rows},))
    target = tvm.target.Target({"kind": "llvm"})
    pipeline = cpu_pipeline(target, precision=precision)
    mod = kokoro_tvm_ext.from_exported_program(ep)
    with target:
        text = pipeline(mod).script(show_meta=False)
    panels = text.count('"kokoro_tvm_ext.matmul_panels"')
    assert panels == (2 if precision == "fp32" else 1) and '"kokoro_tvm_ext.matmul"' not in text, text
    vm = relax.VirtualMachine(tvm.compile(mod, target=target, relax_pipeline=pipeline), tvm.cpu())
    x = torch.randn(70, 48)
    got = vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy()
    with torch.no_grad():
        want = model.double()(x.double()).numpy()
    tol = 1e-5 if precision == "fp32" else 0.05  # int8: the quantization of the 48 -> 40 layer
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
