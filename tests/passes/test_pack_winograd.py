"""PackWeightsWinograd: which conv1d calls go to the Winograd kernel, and the
compiled result against torch at several lengths (1, a partial tile, many jobs)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.passes.pack_winograd import worth_it  # noqa: E402
from kokoro_tvm_ext.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402
from tvm_build import run_vm  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})


class ResBlock(torch.nn.Module):
    """A vocoder residual block's convolutions, plus ones that stay on the GEMM."""

    def __init__(self):
        super().__init__()
        self.dilated = torch.nn.Conv1d(256, 256, 7, dilation=3, padding=9)  # Winograd
        self.wide = torch.nn.Conv1d(256, 300, 11, padding=5)                # Winograd
        self.narrow = torch.nn.Conv1d(300, 128, 3, padding=1, bias=False)   # Winograd
        self.thin = torch.nn.Conv1d(128, 64, 5, padding=2)                  # 64 out: GEMM
        self.grouped = torch.nn.Conv1d(64, 256, 3, padding=1, groups=2)     # 2 groups: GEMM

        self.f0 = torch.nn.Conv1d(256, 256, 3, padding=1)                   # feeds a cumsum: GEMM

    def forward(self, x):
        y = self.wide(torch.nn.functional.leaky_relu(self.dilated(x) + x, 0.1))
        return self.grouped(self.thin(self.narrow(y))), torch.cumsum(self.f0(x), dim=2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return ResBlock().eval()


@pytest.fixture(scope="module")
def imported(model):
    length = torch.export.Dim("length", min=1, max=4096)
    ep = torch.export.export(model, (torch.randn(1, 256, 32),), dynamic_shapes=({2: length},))
    return kokoro_tvm_ext.from_exported_program(ep)


def kernels(mod) -> list[str]:
    with TARGET:
        text = tvm.transform.Sequential(plugin_passes())(mod).script(show_meta=False)
    return sorted(name for name in text.split('"') if name.startswith("kokoro_tvm_ext.conv"))


def test_only_wide_stride_one_convolutions_go_winograd(imported):
    assert kernels(imported) == [
        "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d",
        "kokoro_tvm_ext.conv1d_winograd", "kokoro_tvm_ext.conv1d_winograd", "kokoro_tvm_ext.conv1d_winograd",
    ]


def test_bf16_mode_leaves_the_winograd_calls_in_f32(imported):
    with TARGET:
        text = tvm.transform.Sequential(plugin_passes(precision="bf16"))(imported).script(show_meta=False)
    names = sorted(name for name in text.split('"') if name.startswith("kokoro_tvm_ext.conv"))
    # thin goes bf16; grouped and f0 (upstream of the cumsum) stay on the f32 GEMM.
    assert names == [
        "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d_bf16",
        "kokoro_tvm_ext.conv1d_winograd", "kokoro_tvm_ext.conv1d_winograd", "kokoro_tvm_ext.conv1d_winograd",
    ]


def test_the_rule_follows_the_measured_shapes():
    assert worth_it(256, 256, 3) and worth_it(512, 512, 11) and worth_it(256, 300, 7)
    assert worth_it(128, 128, 7) and worth_it(128, 300, 3)
    assert not worth_it(64, 128, 5) and not worth_it(128, 64, 5)  # narrower: not measured in Kokoro, stays
    assert not worth_it(1024, 1024, 3)  # 8/3 the weight memory, slower on short inputs
    assert not worth_it(256, 256, 4)   # no transform for 4 taps


@pytest.fixture(scope="module")
def vm(imported):
    exe = tvm.compile(imported, target=TARGET, relax_pipeline=cpu_pipeline(TARGET))
    return relax.VirtualMachine(exe, tvm.cpu())


@pytest.mark.parametrize("length", [1, 2, 37, 1000])
def test_compiled_block_matches_torch(model, vm, length):
    x = torch.randn(1, 256, length, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        wants = [w.double().numpy() for w in model(x)]
    for got, want in zip(run_vm(vm, x.numpy()), wants):
        assert got.shape == want.shape
        # Relative to the output's scale. Measured: the GEMM path <= 8e-7; with
        # Winograd <= 1.4e-5, nearly all of it from F(2,11)'s larger transforms.
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < 5e-5, err
