"""The plugin's CPU pipeline: heavy ops dispatched to Rust kernels, the rest parallel, numbers unchanged."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

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
