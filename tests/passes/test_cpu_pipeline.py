"""The plugin's CPU pipeline: heavy ops dispatched to Rust kernels, the rest parallel, numbers unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.script import ir as I, relax as R  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.passes.pipeline import cpu_pipeline, pass_list, plugin_passes  # noqa: E402
from tvm_build import run_vm  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})


class ConvBlock(torch.nn.Module):
    """The op mix of Kokoro's vocoder and encoders, at odd sizes."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(5, 7, 3, padding=2, dilation=2)
        self.grouped = torch.nn.Conv1d(7, 7, 5, padding=2, groups=7)
        self.up = torch.nn.ConvTranspose1d(7, 6, 4, stride=2, padding=1)
        self.norm = torch.nn.InstanceNorm1d(6, affine=True)
        self.linear = torch.nn.Linear(6, 3)

    def forward(self, x):
        y = torch.nn.functional.leaky_relu(self.grouped(self.conv(x)), 0.2)
        y = self.norm(self.up(y))
        y = y + torch.sin(y) ** 2
        return self.linear(y.transpose(1, 2))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ConvBlock().eval()


@pytest.fixture(scope="module")
def imported(model):
    # Batch stays static: affine instance norm repeats its weight per batch item,
    # which stock TVM cannot convert for a symbolic batch (Kokoro's audio stage is batch 1).
    L = torch.export.Dim("L", min=2, max=4096)
    ep = torch.export.export(model, (torch.randn(2, 5, 9),), dynamic_shapes=({2: L},))
    return kokoro_tvm_ext.from_exported_program(ep)


def test_heavy_ops_go_to_the_kernels(imported):
    with TARGET:
        mod = tvm.transform.Sequential(plugin_passes())(imported)
    text = mod.script(show_meta=False)
    assert text.count('"kokoro_tvm_ext.conv1d"') == 2
    assert text.count('"kokoro_tvm_ext.conv1d_transpose"') == 1
    assert text.count('"kokoro_tvm_ext.matmul"') == 1
    assert "R.nn.conv1d(" not in text and "R.matmul(" not in text


def test_remaining_primfuncs_are_parallel(imported):
    with TARGET:
        mod = tvm.transform.Sequential(pass_list(TARGET)[:-7])(imported)  # stop before lowering
    prim_funcs = [f for _, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert prim_funcs
    scheduled = [f for f in prim_funcs if f.attrs is not None and "tirx.is_scheduled" in f.attrs]
    assert len(scheduled) == len(prim_funcs)
    assert all("T.parallel" in f.script() for f in scheduled)


@pytest.mark.parametrize("use_kernels", [True, False])
def test_pipeline_matches_torch_at_several_shapes(model, imported, use_kernels):
    exe = tvm.compile(imported, target=TARGET, relax_pipeline=cpu_pipeline(TARGET, use_kernels=use_kernels))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    for shape in [(2, 5, 2), (2, 5, 9), (2, 5, 301)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(run_vm(vm, x.numpy()), want, rtol=1e-4, atol=1e-4)


@I.ir_module
class MaskedSoftmax:
    """ALBERT's attention tail: mask add, softmax, head split."""

    @R.function
    def main(x: R.Tensor((1, 3, "n", "n"), "float32"), mask: R.Tensor((1, 1, "n", "n"), "bool"),
             q: R.Tensor((1, "n", 3, 5), "float32"), v: R.Tensor((1, 1, 2), "float32")):
        with R.dataflow():
            a = R.add(x, R.where(mask, R.const(0.0, "float32"), R.const(float("-inf"), "float32")))
            s = R.nn.softmax(a, axis=-1)
            t = R.multiply(R.permute_dims(q, [0, 2, 1, 3]), R.const(0.125, "float32"))
            w = R.add(v, R.const(1.0, "float32"))  # too small to share out: one fused loop
            R.output(s, t, w)
        return s, t, w


def _loops(func):
    text = func.script()
    return text.count("in T.parallel("), text.count("in range(")


def test_elementwise_blocks_keep_a_vectorizable_inner_loop():
    with TARGET:
        mod = tvm.transform.Sequential(pass_list(TARGET)[:-7])(MaskedSoftmax)
    funcs = {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}
    transpose = next(f for name, f in funcs.items() if "transpose" in name)
    assert _loops(transpose) == (1, 1)  # parallel over (head, token), serial over the 5 features
    small = next(f for name, f in funcs.items() if name.startswith("add") and "where" not in name)
    assert _loops(small) == (1, 0)


@pytest.mark.parametrize("n", [1, 2, 17])
def test_masked_softmax_matches_numpy(n):
    exe = tvm.compile(MaskedSoftmax, target=TARGET, relax_pipeline=cpu_pipeline(TARGET))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    rng = np.random.default_rng(n)
    x = rng.standard_normal((1, 3, n, n)).astype("float32")
    mask = rng.random((1, 1, n, n)) < 0.8
    mask[..., 0] = True  # every row keeps one position
    q = rng.standard_normal((1, n, 3, 5)).astype("float32")
    v = rng.standard_normal((1, 1, 2)).astype("float32")
    s, t, w = run_vm(vm, x, mask, q, v)
    a = np.where(mask, x, -np.inf)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t, q.transpose(0, 2, 1, 3) * np.float32(0.125))
    np.testing.assert_array_equal(w, v + 1)
