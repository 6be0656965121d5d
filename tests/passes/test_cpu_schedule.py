"""ScheduleParallelLoops alone: the leading spatial loops of every unscheduled PrimFunc run as one
parallel loop, an inner spatial loop stays serial for LLVM to vectorize unless too little is left to share."""

from __future__ import annotations

import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.cpu_schedule import ScheduleParallelLoops

TARGET = tvm.target.Target({"kind": "llvm"})


@I.ir_module
class Unscheduled:
    @T.prim_func(private=True, s_tir=True)
    def scale(x: T.Buffer((4, 8, 5), "float32"), y: T.Buffer((4, 8, 5), "float32")):
        for i, j, k in T.grid(4, 8, 5):
            with T.sblock("scale"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                y[vi, vj, vk] = x[vi, vj, vk] * T.float32(2)

    @T.prim_func(private=True, s_tir=True)
    def small(x: T.Buffer((2, 3), "float32"), y: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            with T.sblock("small"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = x[vi, vj] + T.float32(1)

    @T.prim_func(private=True, s_tir=True)
    def rowsum(x: T.Buffer((16, 7), "float32"), y: T.Buffer((16,), "float32")):
        for i, k in T.grid(16, 7):
            with T.sblock("rowsum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    y[vi] = T.float32(0)
                y[vi] = y[vi] + x[vi, vk]


@I.ir_module
class Scheduled:
    @T.prim_func(private=True, s_tir=True)
    def scale(x: T.Buffer((4, 8, 5), "float32"), y: T.Buffer((4, 8, 5), "float32")):
        T.func_attr({"tirx.is_scheduled": True})
        for ij in T.parallel(32):  # 32 iterations to share; the 5 features stay an inner loop
            for k in range(5):
                with T.sblock("scale"):
                    vi = T.axis.spatial(4, ij // 8)
                    vj = T.axis.spatial(8, ij % 8)
                    vk = T.axis.spatial(5, k)
                    y[vi, vj, vk] = x[vi, vj, vk] * T.float32(2)

    @T.prim_func(private=True, s_tir=True)
    def small(x: T.Buffer((2, 3), "float32"), y: T.Buffer((2, 3), "float32")):
        T.func_attr({"tirx.is_scheduled": True})
        for ij in T.parallel(6):  # 2 iterations are too few to share: all loops fused
            with T.sblock("small"):
                vi = T.axis.spatial(2, ij // 3)
                vj = T.axis.spatial(3, ij % 3)
                y[vi, vj] = x[vi, vj] + T.float32(1)

    @T.prim_func(private=True, s_tir=True)
    def rowsum(x: T.Buffer((16, 7), "float32"), y: T.Buffer((16,), "float32")):
        T.func_attr({"tirx.is_scheduled": True})
        for i in T.parallel(16):
            for k in range(7):  # the reduction stays serial inside each iteration
                with T.sblock("rowsum"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    with T.init():
                        y[vi] = T.float32(0)
                    y[vi] = y[vi] + x[vi, vk]


def test_outer_spatial_loops_become_one_parallel_loop():
    with TARGET:
        tvm.ir.assert_structural_equal(ScheduleParallelLoops()(Unscheduled), Scheduled)


@I.ir_module
class SmallScheduled:
    @T.prim_func(private=True, s_tir=True)
    def small(x: T.Buffer((2, 3), "float32"), y: T.Buffer((2, 3), "float32")):
        T.func_attr({"tirx.is_scheduled": True})
        for i in T.parallel(2):
            for j in range(3):
                with T.sblock("small"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    y[vi, vj] = x[vi, vj] + T.float32(1)


def test_min_parallel_decides_when_the_inner_loop_stays_serial():
    small = tvm.IRModule({"small": Unscheduled["small"]})
    with TARGET:
        tvm.ir.assert_structural_equal(ScheduleParallelLoops(min_parallel=2)(small), SmallScheduled)


def test_scheduled_functions_are_left_alone():
    with TARGET:
        tvm.ir.assert_structural_equal(ScheduleParallelLoops()(Scheduled), Scheduled)
