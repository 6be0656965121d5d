"""merge_modules: several imported IRModules in one, every global renamed under its module's prefix."""

from __future__ import annotations

import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.merge_modules import merge_modules


def _stage(scale: float):
    @I.ir_module
    class Stage:
        @T.prim_func(private=True)
        def double(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
            for i in range(4):
                y[i] = x[i] * T.float32(scale)

        @R.function
        def main(x: R.Tensor((4,), "float32")):
            cls = Stage
            y = R.call_tir(cls.double, (x,), out_ty=R.Tensor((4,), "float32"))
            return y

    return Stage


@I.ir_module
class Merged:
    @T.prim_func(private=True)
    def text__double(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            y[i] = x[i] * T.float32(2.0)

    @T.prim_func(private=True)
    def audio__double(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            y[i] = x[i] * T.float32(3.0)

    @R.function
    def text(x: R.Tensor((4,), "float32")):
        cls = Merged
        y = R.call_tir(cls.text__double, (x,), out_ty=R.Tensor((4,), "float32"))
        return y

    @R.function
    def audio(x: R.Tensor((4,), "float32")):
        cls = Merged
        y = R.call_tir(cls.audio__double, (x,), out_ty=R.Tensor((4,), "float32"))
        return y


def test_each_module_keeps_its_own_functions_under_its_prefix():
    merged = merge_modules({"text": _stage(2.0), "audio": _stage(3.0)})
    tvm.ir.assert_structural_equal(merged, Merged)


def test_name_collision_is_reported():
    # "s__double" is both the second module's helper and the first module's entry.
    with pytest.raises(ValueError, match="two functions named s__double"):
        merge_modules({"s__double": _stage(2.0), "s": _stage(3.0)})
