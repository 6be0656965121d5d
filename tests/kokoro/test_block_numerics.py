"""Kokoro's building blocks exported from torch, compiled through the plugin's pipeline, against torch.

The passes are tested alone on hand-written IR in tests/passes; here the importer writes the IR, so
these also check that each pass finds the patterns torch.export really produces (the kernels named in
each test must be called), and that the numbers do not change.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.expr_functor import PyExprVisitor, visitor  # noqa: E402
from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.model.runtime.weights import load_weights, write_weights  # noqa: E402
from kokoro_tvm_ext.plugin.kernels import KernelCall  # noqa: E402
from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})


def _export(model, args, dynamic_shapes=None, **kwargs):
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    return kokoro_tvm_ext.from_exported_program(ep, **kwargs)


def kernels_called(mod, **options) -> list[str]:
    """The plugin kernels the plugin passes call in ``mod``, sorted (short names, e.g. "conv1d")."""
    with TARGET:
        out = tvm.transform.Sequential(plugin_passes(**options))(mod)
    names = []

    @visitor
    class Calls(PyExprVisitor):
        def visit_call_(self, call):
            kernel = KernelCall.read(call)
            if kernel is not None:
                names.append(kernel.name)
            super().visit_call_(call)

    for _, func in out.functions_items():
        if isinstance(func, relax.Function):
            Calls().visit_expr(func)
    return sorted(names)


def _vm(mod, **options):
    exe = tvm.compile(mod, target=TARGET, relax_pipeline=cpu_pipeline(TARGET, **options))
    return relax.VirtualMachine(exe, tvm.cpu())


def _first(out):
    return (out if isinstance(out, tvm.runtime.Tensor) else out[0]).numpy()


# ALBERT's attention, the vocoder's biases ---------------------------------------------------------


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


def test_attention_matches_torch():
    torch.manual_seed(0)
    model = Attention().eval()
    b, t = torch.export.Dim("B", min=1, max=8), torch.export.Dim("T", min=1, max=512)
    x, mask = torch.randn(2, 7, 24), torch.ones(2, 1, 7, 7, dtype=torch.bool)
    mod = _export(model, (x, mask), ({0: b, 1: t}, {0: b, 2: t, 3: t}))
    assert kernels_called(mod) == ["batch_matmul"] * 2 + ["matmul_panels"] * 4 + ["softmax"]
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


def test_conv_bias_matches_torch():
    torch.manual_seed(1)
    model = ConvBias().eval()
    mod = _export(model, (torch.randn(1, 5, 9),), ({2: torch.export.Dim("L", min=2, max=4096)},))
    assert kernels_called(mod) == ["conv1d"] * 3 + ["conv1d_transpose"]
    vm = _vm(mod)
    gen = torch.Generator().manual_seed(3)
    for length in (2, 9, 301):
        x = torch.randn(1, 5, length, generator=gen)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(_first(vm["main"](tvm.runtime.tensor(x.numpy()))), want, rtol=1e-5, atol=1e-5)


# The op mix of the vocoder and encoders -----------------------------------------------------------


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


@pytest.mark.parametrize("use_kernels", [True, False])
def test_conv_block_matches_torch_at_several_shapes(use_kernels):
    torch.manual_seed(0)
    model = ConvBlock().eval()
    # Batch stays static: affine instance norm repeats its weight per batch item,
    # which stock TVM cannot convert for a symbolic batch (Kokoro's audio stage is batch 1).
    mod = _export(model, (torch.randn(2, 5, 9),), ({2: torch.export.Dim("L", min=2, max=4096)},))
    want_kernels = ["conv1d", "conv1d", "conv1d_transpose", "matmul_panels"] if use_kernels else []
    assert kernels_called(mod, use_kernels=use_kernels) == want_kernels
    vm = _vm(mod, use_kernels=use_kernels)
    for shape in [(2, 5, 2), (2, 5, 9), (2, 5, 301)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(run_vm(vm, x.numpy()), want, rtol=1e-4, atol=1e-4)


# AdaIN chains -------------------------------------------------------------------------------------


class AdaIN1d(torch.nn.Module):
    """Kokoro's AdaIN1d (istftnet.py / modules.py)."""

    def __init__(self, style_dim, channels):
        super().__init__()
        self.norm = torch.nn.InstanceNorm1d(channels, affine=True)
        self.fc = torch.nn.Linear(style_dim, channels * 2)

    def forward(self, x, s):
        h = self.fc(s).view(s.size(0), -1, 1)
        gamma, beta = torch.chunk(h, chunks=2, dim=1)
        return (1 + gamma) * self.norm(x) + beta


class AdaINBlock(torch.nn.Module):
    """AdaIN + Snake (AdaINResBlock1), AdaIN + leaky_relu (AdainResBlk1d), and a bare AdaIN.

    ``leak`` returns an intermediate of the Snake chain too: that chain must stay unfused.
    """

    def __init__(self, channels=17, style_dim=8, leak=False):
        super().__init__()
        self.snake_norm = AdaIN1d(style_dim, channels)
        self.alpha = torch.nn.Parameter(torch.rand(1, channels, 1) * 2 + 0.3)
        self.conv = torch.nn.Conv1d(channels, channels, 3, padding=1)
        self.leaky_norm = AdaIN1d(style_dim, channels)
        self.bare_norm = AdaIN1d(style_dim, channels)
        self.leak = leak
        with torch.no_grad():  # non-trivial instance norm affines
            for m in (self.snake_norm, self.leaky_norm, self.bare_norm):
                m.norm.weight.uniform_(0.5, 1.5)
                m.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, s):
        y = self.snake_norm(x, s)
        sine = torch.sin(self.alpha * y)
        h = y + (1 / self.alpha) * (sine**2)
        h = self.conv(h)
        h = torch.nn.functional.leaky_relu(self.leaky_norm(h, s), 0.2)
        out = self.bare_norm(h, s) * 2.0
        return (out, sine) if self.leak else out


class SharedNorm(torch.nn.Module):
    """instance_norm's output read twice: nothing of that chain may be fused."""

    leak = False

    def __init__(self):
        super().__init__()
        self.adain = AdaIN1d(8, 17)

    def forward(self, x, s):
        n = self.adain.norm(x)
        h = self.adain.fc(s).view(1, -1, 1)
        gamma, beta = torch.chunk(h, 2, dim=1)
        return torch.nn.functional.leaky_relu((1 + gamma) * n + beta, 0.2) + n


@pytest.mark.parametrize(
    "make,adain_calls",
    [
        (AdaINBlock, 3),  # one call per chain
        (lambda: AdaINBlock(leak=True), 3),  # the Snake's AdaIN alone, without activation
        (SharedNorm, 0),
    ],
)
def test_adain_chains_match_torch(make, adain_calls):
    torch.manual_seed(0)
    block = make().eval()
    args = (torch.randn(1, 17, 9), torch.randn(1, 8))
    mod = _export(block, args, ({2: torch.export.Dim("L", min=2, max=100_000)}, None))
    assert kernels_called(mod).count("adain") == adain_calls
    vm = _vm(mod)
    for length in (2, 5, 1000):
        x = torch.randn(1, 17, length) * 3 + 1
        s = torch.randn(1, 8)
        with torch.no_grad():
            want = block(x, s)
        got = run_vm(vm, x.numpy(), s.numpy())
        for g, w in zip(got if block.leak else [got], want if block.leak else [want]):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)


# Winograd and bf16 --------------------------------------------------------------------------------


class ResBlock(torch.nn.Module):
    """A vocoder residual block's convolutions, plus ones that stay on the GEMM."""

    def __init__(self):
        super().__init__()
        self.dilated = torch.nn.Conv1d(256, 256, 7, dilation=3, padding=9)  # Winograd
        self.wide = torch.nn.Conv1d(256, 300, 11, padding=5)  # Winograd
        self.narrow = torch.nn.Conv1d(300, 128, 3, padding=1, bias=False)  # Winograd
        self.thin = torch.nn.Conv1d(128, 64, 5, padding=2)  # 64 out: GEMM
        self.grouped = torch.nn.Conv1d(64, 256, 3, padding=1, groups=2)  # 2 groups: GEMM
        self.f0 = torch.nn.Conv1d(256, 256, 3, padding=1)  # feeds a cumsum: GEMM

    def forward(self, x):
        y = self.wide(torch.nn.functional.leaky_relu(self.dilated(x) + x, 0.1))
        return self.grouped(self.thin(self.narrow(y))), torch.cumsum(self.f0(x), dim=2)


@pytest.fixture(scope="module")
def res_block():
    torch.manual_seed(0)
    model = ResBlock().eval()
    length = torch.export.Dim("length", min=1, max=4096)
    return model, _export(model, (torch.randn(1, 256, 32),), ({2: length},))


def test_residual_block_kernels_in_both_precisions(res_block):
    _, mod = res_block
    assert kernels_called(mod) == ["conv1d"] * 3 + ["conv1d_winograd"] * 3
    # bf16: thin goes bf16; grouped and f0 (upstream of the cumsum) stay on the f32 GEMM.
    assert kernels_called(mod, precision="bf16") == ["conv1d"] * 2 + ["conv1d_bf16"] + ["conv1d_winograd"] * 3


@pytest.fixture(scope="module")
def res_block_vm(res_block):
    return _vm(res_block[1])


@pytest.mark.parametrize("length", [1, 2, 37, 1000])
def test_winograd_block_matches_torch(res_block, res_block_vm, length):
    model, vm = res_block[0], res_block_vm
    x = torch.randn(1, 256, length, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        wants = [w.double().numpy() for w in model(x)]
    for got, want in zip(run_vm(vm, x.numpy()), wants):
        assert got.shape == want.shape
        # Relative to the output's scale. Measured: the GEMM path <= 8e-7; with
        # Winograd <= 1.4e-5, nearly all of it from F(2,11)'s larger transforms.
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < 5e-5, err


class SineSource(torch.nn.Module):
    """Kokoro's shape in small: an F0 curve integrated into a phase, then a decoder."""

    def __init__(self):
        super().__init__()
        self.f0 = torch.nn.Conv1d(4, 1, 3, padding=1)
        self.depthwise = torch.nn.Conv1d(4, 4, 3, padding=1, groups=4)
        self.decoder = torch.nn.Conv1d(4, 6, 3, padding=1)
        self.proj = torch.nn.Linear(6, 5)

    def forward(self, x):
        phase = torch.cumsum(self.f0(x), dim=2)
        y = self.decoder(self.depthwise(x) * torch.sin(phase))
        return self.proj(y.transpose(1, 2))


def test_bf16_pipeline_runs_close_to_torch():
    torch.manual_seed(0)
    model = SineSource().eval()
    mod = _export(model, (torch.randn(1, 4, 16),))
    # f0 feeds the cumsum: f32; the depthwise conv: f32 (no GEMM); the decoder and the projection: bf16.
    assert kernels_called(mod, precision="bf16") == ["conv1d", "conv1d", "conv1d_bf16", "matmul_bf16"]
    vm = _vm(mod, precision="bf16")
    x = torch.randn(1, 4, 16)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_vm(vm, x.numpy()), want, rtol=0, atol=2e-2 * np.abs(want).max())


# Lifted weights, merged modules -------------------------------------------------------------------


def test_a_compiled_module_runs_the_same_on_mapped_weights(tmp_path):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(16, 32, 3, padding=1)
            self.linear = torch.nn.Linear(32, 24)

        def forward(self, x):
            return self.linear(torch.tanh(self.conv(x)).transpose(1, 2))

    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(1, 16, 37)
    mod = _export(model, (x,))
    sink = {}
    lifted = _vm(mod, weights=sink)
    index = write_weights(tmp_path / "weights.bin", sink)
    weights = load_weights(tmp_path / "weights.bin", index, tvm)
    assert sum(int(np.prod(w.shape)) for w in weights["main"]) >= 32 * 16 * 3  # the conv weight at least
    got = _first(lifted["main"](tvm.runtime.tensor(x.numpy()), *weights["main"]))
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


class LSTMish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 3, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0] + 1


@pytest.mark.parametrize("impl", ["plugin", "tir"])
def test_merged_modules_keep_their_entries_apart(impl):
    from kokoro_tvm_ext.plugin.passes.merge_modules import merge_modules

    lstm = kokoro_tvm_ext.use_plugin_lstm(LSTMish().eval())
    a = _export(Double(), (torch.ones(2),))
    # The TIR LSTM brings helper PrimFuncs whose names would clash across stages.
    b = _export(lstm, (torch.ones(1, 5, 4),), lstm_impl=impl)
    c = _export(lstm, (torch.ones(1, 5, 4),), lstm_impl=impl)
    vm = build_vm(merge_modules({"first": a, "second": b, "third": c}))
    x = np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(run_vm(vm, x, fn="first"), x * 2)
    seq = torch.randn(1, 5, 4)
    with torch.no_grad():
        want = lstm(seq).numpy()
    np.testing.assert_allclose(run_vm(vm, seq.numpy(), fn="third"), want, rtol=1e-5, atol=1e-5)
