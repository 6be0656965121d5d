"""The pipeline's fast math (FastMathTransform): exp, tanh, erf, softmax against numpy in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm_build import TARGET, run_vm

from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline


@I.ir_module
class Transcendentals:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), s: R.Tensor((2, "m"), "float32")):
        with R.dataflow():
            e = R.exp(x)
            t = R.tanh(x)
            f = R.erf(x)
            p = R.nn.softmax(s, axis=-1)
            R.output(e, t, f, p)
        return e, t, f, p


@pytest.fixture(scope="module")
def fast_vm():
    target = tvm.target.Target(TARGET)
    exe = tvm.compile(Transcendentals, target=target, relax_pipeline=cpu_pipeline(target))
    return relax.VirtualMachine(exe, tvm.cpu())


def _relative_error(got, want):
    return np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30))


@pytest.mark.parametrize("m", [1, 17, 311])
def test_pipeline_fast_math_matches_float64(fast_vm, m):
    # Dense near 0, where tanh and erf turn, and out to where exp nears overflow.
    x = np.concatenate([np.linspace(-6, 6, 100_001), np.linspace(-87, 88, 20_001)]).astype(np.float32)
    s = (np.random.default_rng(m).standard_normal((2, m)) * 8).astype(np.float32)
    e, t, f, p = run_vm(fast_vm, x, s)
    xd, sd = x.astype(np.float64), s.astype(np.float64)
    # exp's range reduction uses a float32 ln 2: the error grows ~6e-8 per unit of |x|.
    exp_error = np.abs(e - np.exp(xd)) / np.exp(xd)
    assert exp_error[np.abs(xd) <= 6].max() < 4e-7
    assert (exp_error < 3e-7 + 6e-8 * np.abs(xd)).all()
    assert _relative_error(t, np.tanh(xd)) < 4e-7
    assert _relative_error(f, np.vectorize(math.erf)(xd)) < 4e-7
    z = np.exp(sd - sd.max(-1, keepdims=True))
    np.testing.assert_allclose(p, z / z.sum(-1, keepdims=True), rtol=2e-6, atol=1e-12)


def test_pipeline_exp_overflows_where_documented(fast_vm):
    # FastMathTransform's exp clamps its input: +inf from 88.38 up (libm: 88.72).
    e, *_ = run_vm(fast_vm, np.array([-100.0, 0.0, 88.0, 88.5], np.float32), np.zeros((2, 1), np.float32))
    assert e[0] == pytest.approx(0.0, abs=1e-38) and e[1] == 1.0
    assert e[2] == pytest.approx(math.exp(88.0), rel=3e-7 + 6e-8 * 88)
    assert np.isinf(e[3])
