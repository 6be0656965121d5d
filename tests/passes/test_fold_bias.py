"""FoldBiasIntoKernels alone: a per-channel bias add after a plugin kernel call becomes the call's bias."""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.fold_bias import FoldBiasIntoKernels


@I.ir_module
class Biased:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((6, 4, 3), "float32"),
        b: R.Tensor((1, 6, 1), "float32"),
        wt: R.Tensor((6, 5, 4), "float32"),
        bt: R.Tensor((5, 1), "float32"),
        a: R.Tensor(("t", 8), "float32"),
        lin: R.Tensor((8, 5), "float32"),
        lb: R.Tensor((5,), "float32"),
    ):
        n, t = T.int64(), T.int64()
        with R.dataflow():
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 6, n), "float32")
            )
            cb = R.add(c, b)  # a Conv1d bias, [1, C, 1]
            ct = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose",
                (1, 0, 0, 0, 1, 1, 0, cb, wt),
                out_ty=R.Tensor((1, 5, n + 3), "float32"),
            )
            ctb = R.add(ct, bt)  # [C, 1]
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin), out_ty=R.Tensor((t, 5), "float32"))
            yb = R.add(lb, y)  # a Linear bias, [N], added in front
            R.output(ctb, yb)
        return ctb, yb


@I.ir_module
class Folded:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((6, 4, 3), "float32"),
        b: R.Tensor((1, 6, 1), "float32"),
        wt: R.Tensor((6, 5, 4), "float32"),
        bt: R.Tensor((5, 1), "float32"),
        a: R.Tensor(("t", 8), "float32"),
        lin: R.Tensor((8, 5), "float32"),
        lb: R.Tensor((5,), "float32"),
    ):
        n, t = T.int64(), T.int64()
        with R.dataflow():
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d",
                (1, 1, 1, 1, 1, 0, x, w),  # dead
                out_ty=R.Tensor((1, 6, n), "float32"),
            )
            b6 = R.reshape(b, R.shape([6]))
            # stride, pad_left, pad_right, dilation, groups, has_bias=1, x, w, bias
            cb = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 1, x, w, b6), out_ty=R.Tensor((1, 6, n), "float32")
            )
            ct = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose",
                (1, 0, 0, 0, 1, 1, 0, cb, wt),
                out_ty=R.Tensor((1, 5, n + 3), "float32"),
            )
            bt5 = R.reshape(bt, R.shape([5]))
            # stride, pad_left, pad_right, output_padding, dilation, groups, has_bias=1, x, w, bias
            ctb = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose",
                (1, 0, 0, 0, 1, 1, 1, cb, wt, bt5),
                out_ty=R.Tensor((1, 5, n + 3), "float32"),
            )
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin), out_ty=R.Tensor((t, 5), "float32"))
            lb5 = R.reshape(lb, R.shape([5]))
            # has_bias=1, x, w, bias
            yb = R.call_dps_packed("kokoro_tvm_ext.matmul", (1, a, lin, lb5), out_ty=R.Tensor((t, 5), "float32"))
            R.output(ctb, yb)
        return ctb, yb


def test_per_channel_bias_adds_become_the_kernels_bias():
    # The bare products are left dead for DeadCodeElimination.
    out = FoldBiasIntoKernels()(Biased)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, Folded)


@I.ir_module
class NotABias:
    @R.function
    def main(
        x: R.Tensor((1, 4, 6), "float32"),
        w: R.Tensor((6, 4, 3), "float32"),
        per_step: R.Tensor((1, 6, 6), "float32"),
        last_axis: R.Tensor((6,), "float32"),
        batch: R.Tensor((2, 6, 1), "float32"),
        b: R.Tensor((1, 6, 1), "float32"),
        a: R.Tensor((3, 8), "float32"),
        lin: R.Tensor((8, 5), "float32"),
        rows: R.Tensor((3, 1), "float32"),
        lb: R.Tensor((5,), "float32"),
    ):
        with R.dataflow():
            c1 = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 6, 6), "float32")
            )
            s1 = R.add(c1, per_step)  # a value per time step, not per channel
            c2 = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 6, 6), "float32")
            )
            s2 = R.add(c2, last_axis)  # along the time axis
            c3 = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 6, 6), "float32")
            )
            s3 = R.add(c3, batch)  # broadcasts the product to a batch of 2
            c4 = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 6, 6), "float32")
            )
            s4 = R.add(c4, b)
            twice = R.multiply(c4, s4)  # the product is used again: it must still be computed alone
            b6 = R.reshape(b, R.shape([6]))
            c5 = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 1, x, w, b6), out_ty=R.Tensor((1, 6, 6), "float32")
            )
            s5 = R.add(c5, b)  # has a bias already
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin), out_ty=R.Tensor((3, 5), "float32"))
            s6 = R.add(y, rows)  # per row, not per output feature
            m = R.matmul(a, lin)
            s7 = R.add(m, lb)  # not a kernel call
            R.output(s1, s2, s3, twice, s5, s6, s7)
        return s1, s2, s3, twice, s5, s6, s7


def test_adds_that_are_not_a_per_channel_bias_of_an_unbiased_call_stay():
    tvm.ir.assert_structural_equal(FoldBiasIntoKernels()(NotABias), NotABias)


@I.ir_module
class TwoBlocks:
    @R.function
    def main(x: R.Tensor((1, 2, 5), "float32"), w: R.Tensor((3, 2, 1), "float32"), b: R.Tensor((1, 3, 1), "float32")):
        with R.dataflow():
            x2 = R.add(x, x)
            y = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 0, 0, 1, 1, 0, x2, w), out_ty=R.Tensor((1, 3, 5), "float32")
            )
            R.output(y)
        z = R.add(y, b)  # moving the call here would take x2 out of its block
        return z


def test_a_bias_add_in_a_later_block_is_left_alone():
    out = FoldBiasIntoKernels()(TwoBlocks)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, TwoBlocks)
