"""DispatchAdaIN: Kokoro's AdaIN + Snake / leaky_relu chains become one fused kernel call, numbers unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402
from tvm_build import run_vm  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})
CALL = '"kokoro_tvm_ext.adain"'


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


class Block(torch.nn.Module):
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


def imported(block):
    length = torch.export.Dim("L", min=2, max=100_000)
    args = (torch.randn(1, 17, 9), torch.randn(1, 8))
    ep = torch.export.export(block, args, dynamic_shapes=({2: length}, None))
    return kokoro_tvm_ext.from_exported_program(ep)


def plugin_ir(mod) -> str:
    with TARGET:
        return tvm.transform.Sequential(plugin_passes())(mod).script(show_meta=False)


def check_against_torch(block, mod):
    exe = tvm.compile(mod, target=TARGET, relax_pipeline=cpu_pipeline(TARGET))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    for length in (2, 5, 1000):
        x = torch.randn(1, 17, length) * 3 + 1
        s = torch.randn(1, 8)
        with torch.no_grad():
            want = block(x, s)
        got = run_vm(vm, x.numpy(), s.numpy())
        for g, w in zip(got if block.leak else [got], want if block.leak else [want]):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4)


def test_all_three_chains_become_one_call_each_and_match_torch():
    torch.manual_seed(0)
    block = Block().eval()
    mod = imported(block)
    text = plugin_ir(mod)
    assert text.count(CALL) == 3
    for op in ("R.nn.instance_norm(", "R.sin(", "R.power(", "R.nn.leakyrelu("):
        assert op not in text, op
    acts = sorted(line.split(CALL + ", (")[1].split(",")[0] for line in text.splitlines() if CALL in line)
    assert acts == ["0", "1", "2"]
    check_against_torch(block, mod)


def test_a_chain_with_an_intermediate_used_twice_is_left_to_tvm():
    torch.manual_seed(0)
    block = Block(leak=True).eval()
    mod = imported(block)
    text = plugin_ir(mod)
    # The Snake chain's sin is also an output: no Snake call; its AdaIN alone is
    # fused (act 0), the other two chains as before.
    acts = sorted(line.split(CALL + ", (")[1].split(",")[0] for line in text.splitlines() if CALL in line)
    assert acts == ["0", "0", "2"]
    assert "R.sin(" in text  # its sin ** 2 is a multiply after ExpandSmallPowers
    check_against_torch(block, mod)


def test_a_shared_norm_output_is_not_rewritten():
    """instance_norm's output read twice: nothing of that chain is fused."""

    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.adain = AdaIN1d(8, 17)

        def forward(self, x, s):
            n = self.adain.norm(x)
            h = self.adain.fc(s).view(1, -1, 1)
            gamma, beta = torch.chunk(h, 2, dim=1)
            return torch.nn.functional.leaky_relu((1 + gamma) * n + beta, 0.2) + n

    torch.manual_seed(0)
    block = Shared().eval()
    block.leak = False
    mod = imported(block)
    text = plugin_ir(mod)
    assert CALL not in text and "R.nn.instance_norm(" in text
    check_against_torch(block, mod)


def test_snake_is_found_after_constant_folding_too():
    """With 1 / alpha already folded to a constant, the chain still matches (by value)."""
    from kokoro_tvm_ext.passes.dispatch_adain import DispatchAdaIN

    torch.manual_seed(0)
    mod = relax.transform.FoldConstant()(imported(Block().eval()))
    assert "R.divide(" not in mod.script(show_meta=False)
    text = DispatchAdaIN(mod).script(show_meta=False)
    assert text.count(CALL + ", (1,") == 1
