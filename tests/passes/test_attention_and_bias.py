"""Attention matmuls go to batch_matmul, bias adds fold into the kernels; numbers match torch."""
from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})


class Attention(torch.nn.Module):
    """ALBERT's self-attention layer: symbolic batch and length, 3 heads of 8."""

    def __init__(self, d=24, heads=3):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mask):
        b, t, d = x.shape
        split = lambda y: y.view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3)  # noqa: E731
        a = torch.nn.functional.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask
        )
        return self.o(a.transpose(1, 2).reshape(b, t, d)) + x


class ConvBias(torch.nn.Module):
    """The vocoder's bias patterns at odd channel counts: conv + bias (+ residual), transposed conv + bias."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(5, 7, 3, padding=1)
        self.c2 = torch.nn.Conv1d(7, 7, 5, padding=4, dilation=2)
        self.up = torch.nn.ConvTranspose1d(7, 3, 4, stride=2, padding=1)
        self.shared = torch.nn.Conv1d(3, 3, 1, bias=False)

    def forward(self, x):
        y = self.c1(x)
        y = self.c2(torch.nn.functional.leaky_relu(y, 0.1)) + y  # residual after the bias
        z = self.up(y)
        s = self.shared(z)  # used twice: no bias to fold, and the product must not run twice
        return s + torch.ones(1, 3, 1) + s * 2


def _export(model, args, dynamic_shapes):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    return kokoro_tvm_ext.from_exported_program(ep)


@pytest.fixture(scope="module")
def attention():
    torch.manual_seed(0)
    model = Attention().eval()
    b, t = torch.export.Dim("B", min=1, max=8), torch.export.Dim("T", min=1, max=512)
    x, mask = torch.randn(2, 7, 24), torch.ones(2, 1, 7, 7, dtype=torch.bool)
    return model, _export(model, (x, mask), ({0: b, 1: t}, {0: b, 2: t, 3: t}))


@pytest.fixture(scope="module")
def conv():
    torch.manual_seed(1)
    model = ConvBias().eval()
    n = torch.export.Dim("L", min=2, max=4096)
    return model, _export(model, (torch.randn(1, 5, 9),), ({2: n},))


def _dispatched(mod) -> str:
    with TARGET:
        return tvm.transform.Sequential(plugin_passes())(mod).script(show_meta=False)


def _calls(text: str, name: str) -> list[str]:
    """The packed-argument lists of every call to kernel ``name``."""
    return re.findall(rf'"kokoro_tvm_ext\.{name}", \(([^)]*)\)', text)


def test_attention_products_go_to_batch_matmul(attention):
    text = _dispatched(attention[1])
    scores, context = _calls(text, "batch_matmul")
    assert scores.startswith("0, 1,")  # k^T read through strides, not copied
    assert context.startswith("0, 0,")
    assert "R.matmul(" not in text
    # The four linear layers take their bias; only the residual add is left.
    linears = _calls(text, "matmul")
    assert len(linears) == 4 and all(c.startswith("1,") for c in linears)
    assert text.count("R.add(") == 2  # the mask and the residual


def test_conv_biases_fold_and_shared_products_do_not(conv):
    text = _dispatched(conv[1])
    convs = _calls(text, "conv1d")
    assert sorted(c.split(",")[5].strip() for c in convs) == ["0", "1", "1"]  # has_bias
    (up,) = _calls(text, "conv1d_transpose")
    assert up.split(",")[6].strip() == "1"
    assert len(convs) == 3 and "R.nn.conv1d" not in text


def _vm(mod):
    exe = tvm.compile(mod, target=TARGET, relax_pipeline=cpu_pipeline(TARGET))
    return relax.VirtualMachine(exe, tvm.cpu())


def _first(out):
    return (out if isinstance(out, tvm.runtime.Tensor) else out[0]).numpy()


def test_attention_matches_torch(attention):
    model, mod = attention
    vm = _vm(mod)
    gen = torch.Generator().manual_seed(2)
    for b, t in [(1, 1), (2, 7), (3, 33), (1, 130)]:
        x = torch.randn(b, t, 24, generator=gen)
        mask = torch.rand(b, 1, t, t, generator=gen) > 0.3
        mask[..., 0] = True  # every query sees at least one key
        with torch.no_grad():
            want = model(x, mask).numpy()
        got = _first(vm["main"](tvm.runtime.tensor(x.numpy()), tvm.runtime.tensor(mask.numpy())))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_bias_matches_torch(conv):
    model, mod = conv
    vm = _vm(mod)
    gen = torch.Generator().manual_seed(3)
    for length in (2, 9, 301):
        x = torch.randn(1, 5, length, generator=gen)
        with torch.no_grad():
            want = model(x).numpy()
        got = _first(vm["main"](tvm.runtime.tensor(x.numpy())))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bias_add_in_a_later_block_is_left_alone():
    """Moving the product's call into another block would take its dataflow inputs out of scope."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    from kokoro_tvm_ext.passes.fold_bias import FoldBiasIntoKernels

    prims = [R.prim_value(v) for v in (1, 0, 0, 1, 1, 0)]  # stride, pads, dilation, groups, has_bias

    @I.ir_module
    class TwoBlocks:
        @R.function
        def main(x: R.Tensor((1, 2, 5), "float32"), w: R.Tensor((3, 2, 1), "float32"),
                 b: R.Tensor((1, 3, 1), "float32")):
            with R.dataflow():
                x2 = R.add(x, x)
                y = R.call_dps_packed("kokoro_tvm_ext.conv1d", (*prims, x2, w), out_ty=R.Tensor((1, 3, 5), "float32"))
                R.output(y)
            z = R.add(y, b)
            return z

    @I.ir_module
    class OneBlock:
        @R.function
        def main(x: R.Tensor((1, 2, 5), "float32"), w: R.Tensor((3, 2, 1), "float32"),
                 b: R.Tensor((1, 3, 1), "float32")):
            with R.dataflow():
                x2 = R.add(x, x)
                y = R.call_dps_packed("kokoro_tvm_ext.conv1d", (*prims, x2, w), out_ty=R.Tensor((1, 3, 5), "float32"))
                z = R.add(y, b)
                R.output(z)
            return z

    kept = FoldBiasIntoKernels(TwoBlocks)
    assert relax.analysis.check_well_formed(kept)
    assert "R.add(y, b)" in kept.script()
    folded = FoldBiasIntoKernels(OneBlock)
    assert relax.analysis.check_well_formed(folded)
    assert "R.add(y, b)" not in folded.script() and '"kokoro_tvm_ext.conv1d", (1, 0, 0, 1, 1, 1,' in folded.script()


def test_transpose_from_an_earlier_block_is_not_looked_through():
    from tvm.script import ir as I
    from tvm.script import relax as R

    from kokoro_tvm_ext.passes.dispatch_kernels import DispatchToPluginKernels

    @I.ir_module
    class Blocks:
        @R.function
        def main(q: R.Tensor((2, 4, 8), "float32"), k: R.Tensor((2, 4, 8), "float32")):
            with R.dataflow():
                k2 = R.add(k, k)
                kt = R.permute_dims(k2, axes=[0, 2, 1])
                R.output(kt)
            kt2 = R.add(kt, kt)  # a plain binding between the two blocks
            with R.dataflow():
                s = R.matmul(q, kt)  # k2 is out of scope here
                s2 = R.matmul(q, R.permute_dims(q, axes=[0, 2, 1]))  # in scope: read through strides
                R.output(s, s2)
            return (kt2, s, s2)

    out = DispatchToPluginKernels(Blocks)
    assert relax.analysis.check_well_formed(out)
    calls = _calls(out.script(), "batch_matmul")
    assert [c.split(",")[1].strip() for c in calls] == ["0", "1"]
