"""A HiFi-GAN generator (tests/vocoder/hifigan.py, small config) through stock TVM, without and
with our kernels, against PyTorch.

Nothing here uses our converters or pipeline: torch.export with a symbolic mel length,
TVM's own ``from_exported_program``, stock ``tvm.compile`` (the default Relax pipeline).
``kokoro_tvm_ext.kernels_enabled()`` around ``tvm.compile`` is the only difference between
the two builds. Each build runs at two mel lengths and must match torch's audio within
1e-4 of its peak (max |tvm - torch| / max |torch|): both builds measured ~1e-6 (fp32,
another summation order), so the bound leaves 100x for other CPUs and kernel paths.

The whole file took 31-52 s on 2 cores shared with other jobs (load average ~5): export, import
and torch reference ~12 s, stock build 9-19 s, build with the kernels 2.5-6 s (no convolution
TIR to generate). Stock TVM builds the small config in ~5 s unloaded, so it is not skipped.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

import kokoro_tvm_ext

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from hifigan import SMALL, make_generator, random_mel  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

from kokoro_tvm_ext.model.compile import default_target  # noqa: E402

FRAMES = (16, 37)  # mel frames: 4096 and 9472 samples; 37 is odd, and neither is the export's example length
REL_TOL = 1e-4
KERNEL_CONVS = ("kokoro_tvm_ext.conv1d", "kokoro_tvm_ext.conv1d_transpose")


@pytest.fixture(scope="module")
def generator():
    return make_generator(SMALL, seed=0)


@pytest.fixture(scope="module")
def exported(generator):
    frames = torch.export.Dim("frames", min=4, max=1024)
    return torch.export.export(generator, (random_mel(24),), dynamic_shapes=({2: frames},))


@pytest.fixture(scope="module")
def cases(generator):
    """(mel, torch's audio) at each length in FRAMES."""
    out = []
    with torch.no_grad():
        for frames in FRAMES:
            mel = random_mel(frames, seed=frames)
            out.append((mel.numpy(), generator(mel).numpy()))
    return out


@pytest.fixture(scope="module")
def imported(exported):
    """TVM's own import of the export, weights as constants (shared: passes do not mutate it)."""
    return from_exported_program(exported, keep_params_as_input=False)


def build(mod: tvm.IRModule) -> relax.VirtualMachine:
    return relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target(default_target())), tvm.cpu())


def assert_matches_torch(vm: relax.VirtualMachine, cases) -> None:
    for mel, want in cases:
        got = vm["main"](tvm.runtime.tensor(mel))
        got = got.numpy() if isinstance(got, tvm.runtime.Tensor) else got[0].numpy()
        assert got.shape == want.shape
        rel = np.abs(got - want).max() / np.abs(want).max()
        assert rel < REL_TOL, f"{mel.shape[-1]} frames: max |tvm - torch| / max |torch| = {rel:.2e}"


def callees(mod: tvm.IRModule) -> collections.Counter:
    """How often each Relax op, and each ``call_dps_packed`` target by name, is called in ``mod``."""
    dps_packed = tvm.ir.Op.get("relax.call_dps_packed")
    found = collections.Counter()

    @relax.expr_functor.visitor
    class Callees(relax.PyExprVisitor):
        def visit_call_(self, call):
            if call.op.same_as(dps_packed):
                found[str(call.args[0].global_symbol)] += 1
            elif isinstance(call.op, tvm.ir.Op):
                found[call.op.name] += 1
            super().visit_call_(call)

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            Callees().visit_expr(func)
    return found


def test_stock_tvm_matches_torch(imported, cases):
    assert_matches_torch(build(imported), cases)


def test_stock_tvm_with_kernels_matches_torch(imported, cases):
    with kokoro_tvm_ext.kernels_enabled():
        vm = build(imported)
    assert_matches_torch(vm, cases)


def test_kernels_take_every_convolution_only_inside_the_scope(imported):
    mod = imported
    ops = callees(mod)
    assert ops["relax.nn.conv1d"] > 0 and ops["relax.nn.conv1d_transpose"] > 0

    def kernel_calls() -> dict:
        legalized = callees(relax.transform.LegalizeOps()(mod))
        return {name: legalized[name] for name in KERNEL_CONVS}

    none = dict.fromkeys(KERNEL_CONVS, 0)
    assert kernel_calls() == none
    with kokoro_tvm_ext.kernels_enabled():
        inside = kernel_calls()
    assert inside == {
        "kokoro_tvm_ext.conv1d": ops["relax.nn.conv1d"],
        "kokoro_tvm_ext.conv1d_transpose": ops["relax.nn.conv1d_transpose"],
    }
    assert kernel_calls() == none
