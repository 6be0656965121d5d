"""The registered pipeline: its passes in order, its registration, and a build through it by name."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm_build import run_vm

from kokoro_tvm_ext.plugin.passes.pipeline import PIPELINE_NAME, cpu_pipeline, pass_list, plugin_passes

TARGET = tvm.target.Target({"kind": "llvm"})


def _names(passes) -> list[str]:
    return [p.info.name for p in passes]


def test_the_plugin_passes_in_order():
    assert _names(plugin_passes(precision="bf16")) == [
        "RemoveNoOpCopies",
        "DispatchToPluginKernels",
        "FoldBiasIntoKernels",
        "DispatchAdaIN",
        "ExpandSmallPowers",
        "FastMathTransform",
        "FoldConstant",
        "PackWeightsWinograd",
        "PackWeightsBF16",
        "PackWeightsF32",
        "DeadCodeElimination",
    ]
    assert "PackWeightsBF16" not in _names(plugin_passes())
    # bf16 on AMX tiles takes Winograd's calls too; fp32 keeps Winograd on any CPU.
    assert "PackWeightsWinograd" not in _names(plugin_passes(precision="bf16", bf16_tiles=True))
    assert "PackWeightsWinograd" in _names(plugin_passes(bf16_tiles=True))
    assert _names(plugin_passes(use_kernels=False)) == [
        "RemoveNoOpCopies",
        "ExpandSmallPowers",
        "FastMathTransform",
        "FoldConstant",
        "DeadCodeElimination",
    ]


def test_the_whole_list_schedules_after_legalizing_and_lifts_last():
    names = _names(pass_list(TARGET, weights={}))
    assert names.index("LegalizeOps") < names.index("ScheduleParallelLoops") < names.index("VMShapeLower")
    assert names[-1] == "LiftWeights" and "LiftWeights" not in _names(pass_list(TARGET))


def test_bad_options_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, got 'fp16'"):
        cpu_pipeline(TARGET, precision="fp16")
    with pytest.raises(ValueError, match="kokoro_tvm_ext_cpu: no target given and none is current"):
        cpu_pipeline()(MaskedSoftmax)


_REGISTRATION = """
import tvm.relax.pipeline as p
stock = set(p.PIPELINE_MAP)
import kokoro_tvm_ext, kokoro_tvm_ext.plugin.frontend
assert set(p.PIPELINE_MAP) == stock, sorted(set(p.PIPELINE_MAP) - stock)
import kokoro_tvm_ext.plugin.passes
assert set(p.PIPELINE_MAP) - stock == {"kokoro_tvm_ext_cpu"}, sorted(set(p.PIPELINE_MAP) - stock)
"""


def test_only_importing_the_passes_registers_the_pipeline():
    # In a fresh process: this one has imported the passes already.
    run = subprocess.run([sys.executable, "-c", _REGISTRATION], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert relax.get_pipeline(PIPELINE_NAME, target=TARGET) is not None


@I.ir_module
class MaskedSoftmax:
    """ALBERT's attention tail: mask add, softmax, head split."""

    @R.function
    def main(
        x: R.Tensor((1, 3, "n", "n"), "float32"),
        mask: R.Tensor((1, 1, "n", "n"), "bool"),
        q: R.Tensor((1, "n", 3, 5), "float32"),
        v: R.Tensor((1, 1, 2), "float32"),
    ):
        with R.dataflow():
            a = R.add(x, R.where(mask, R.const(0.0, "float32"), R.const(float("-inf"), "float32")))
            s = R.nn.softmax(a, axis=-1)
            t = R.multiply(R.permute_dims(q, [0, 2, 1, 3]), R.const(0.125, "float32"))
            w = R.add(v, R.const(1.0, "float32"))
            R.output(s, t, w)
        return s, t, w


@pytest.fixture(scope="module")
def softmax_vm():
    exe = tvm.compile(MaskedSoftmax, target=TARGET, relax_pipeline=PIPELINE_NAME)  # by its registered name
    return relax.VirtualMachine(exe, tvm.cpu())


@pytest.mark.parametrize("n", [1, 2, 17])
def test_masked_softmax_built_by_name_matches_numpy(softmax_vm, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((1, 3, n, n)).astype("float32")
    mask = rng.random((1, 1, n, n)) < 0.8
    mask[..., 0] = True  # every row keeps one position
    q = rng.standard_normal((1, n, 3, 5)).astype("float32")
    v = rng.standard_normal((1, 1, 2)).astype("float32")
    s, t, w = run_vm(softmax_vm, x, mask, q, v)
    a = np.where(mask, x, -np.inf)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t, q.transpose(0, 2, 1, 3) * np.float32(0.125))
    np.testing.assert_array_equal(w, v + 1)


def test_bf16_tiles_are_the_cpus_that_llvm_says_have_amx_bf16():
    """Against LLVM's CPU tables: Sapphire and Emerald Rapids have AMX-BF16; Zen 4 (AVX512-BF16 without
    AMX), Cascade Lake, a generic x86 and an Arm CPU do not."""
    from kokoro_tvm_ext.plugin.passes.pipeline import has_bf16_tiles

    for cpu, want in [("sapphirerapids", True), ("emeraldrapids", True), ("znver4", False), ("cascadelake", False)]:
        assert has_bf16_tiles(tvm.target.Target({"kind": "llvm", "mcpu": cpu})) is want, cpu
    assert not has_bf16_tiles(tvm.target.Target({"kind": "llvm"}))
    assert not has_bf16_tiles(tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76"}))
