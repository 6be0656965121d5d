"""ExpandSmallPowers alone: float powers by a constant 2 or 3 become multiplies, nothing else does."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm_build import build_vm, run_vm

from kokoro_tvm_ext.plugin.passes.expand_powers import ExpandSmallPowers


@I.ir_module
class Powers:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        with R.dataflow():
            cube = R.power(x, R.const(3.0, "float32"))  # expanded
            square = R.power(x, R.const([2.0], "float32"))  # a one-element exponent: expanded
            other = R.power(x, R.const(2.5, "float32"))  # kept
            wide = R.power(x, R.const([[2.0, 2.0, 2.0]], "float32"))  # not one exponent: kept
            up = R.power(x, R.const([[[3.0]]], "float32"))  # a higher rank result: kept
            R.output(cube, square, other, wide, up)
        return cube, square, other, wide, up


@I.ir_module
class Expanded:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        with R.dataflow():
            x2 = R.multiply(x, x)
            cube = R.multiply(x2, x)
            square = R.multiply(x, x)
            other = R.power(x, R.const(2.5, "float32"))
            wide = R.power(x, R.const([[2.0, 2.0, 2.0]], "float32"))
            up = R.power(x, R.const([[[3.0]]], "float32"))
            R.output(cube, square, other, wide, up)
        return cube, square, other, wide, up


def test_powers_by_two_and_three_become_multiplies():
    tvm.ir.assert_structural_equal(ExpandSmallPowers()(Powers), Expanded)


@I.ir_module
class NotExpanded:
    @R.function
    def main(x: R.Tensor((4,), "float32"), i: R.Tensor((4,), "int32"), e: R.Tensor((), "float32")):
        with R.dataflow():
            ints = R.power(i, R.const(2, "int32"))  # not a float
            var = R.power(x, e)  # exponent not a constant
            four = R.power(x, R.const(4.0, "float32"))  # not 2 or 3
            R.output(ints, var, four)
        return ints, var, four


def test_integer_variable_and_other_exponents_are_left_alone():
    tvm.ir.assert_structural_equal(ExpandSmallPowers()(NotExpanded), NotExpanded)


@pytest.mark.parametrize("n", [1, 7])
def test_expanded_powers_match_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-3, 3, (n, 3)).astype(np.float32)
    got = run_vm(build_vm(ExpandSmallPowers()(Powers)), x)
    xd = x.astype(np.float64)
    for value, want in zip(got, [xd**3, xd**2, np.power(xd, 2.5), xd**2, xd[None] ** 3]):
        finite = np.isfinite(want)
        np.testing.assert_allclose(value[finite], want[finite], rtol=3e-7, atol=1e-30)
