"""PackWeightsBF16: which plugin calls precision="bf16" moves to the bf16 kernels."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.passes.pack_bf16 import PRECISION_ATTR  # noqa: E402
from kokoro_tvm_ext.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402
from tvm_build import run_vm  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})


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


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return SineSource().eval()


@pytest.fixture(scope="module")
def imported(model):
    ep = torch.export.export(model, (torch.randn(1, 4, 16),))
    return kokoro_tvm_ext.from_exported_program(ep)


def kernels(mod) -> list[str]:
    with TARGET:
        text = tvm.transform.Sequential(plugin_passes(precision="bf16"))(mod).script(show_meta=False)
    return sorted(name for name in text.split('"') if name.startswith("kokoro_tvm_ext."))


def test_only_calls_past_the_phase_go_bf16(imported):
    # f0 feeds the cumsum: f32; the depthwise conv: f32 (no GEMM); the decoder and
    # the projection: bf16.
    assert kernels(imported) == [
        "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d_bf16", "kokoro_tvm_ext.matmul_bf16",
    ]


def test_an_fp32_function_is_left_alone(imported):
    mod = tvm.IRModule(dict(imported.functions_items()))
    mod["main"] = mod["main"].with_attr(PRECISION_ATTR, "fp32")
    assert "kokoro_tvm_ext.conv1d_bf16" not in kernels(mod)


def test_bf16_pipeline_runs_close_to_torch(model, imported):
    exe = tvm.compile(imported, target=TARGET, relax_pipeline=cpu_pipeline(TARGET, precision="bf16"))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    x = torch.randn(1, 4, 16)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_vm(vm, x.numpy()), want, rtol=0, atol=2e-2 * np.abs(want).max())


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, got 'fp16'"):
        cpu_pipeline(TARGET, precision="fp16")
