"""DispatchToPluginKernels alone: conv1d, conv1d_transpose, float32 matmuls and softmax become plugin kernel
calls, written out below argument by argument (which pins the kernels' calling convention)."""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.dispatch_kernels import DispatchToPluginKernels


@I.ir_module
class Heavy:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((6, 2, 3), "float32"),
        wt: R.Tensor((6, 2, 4), "float32"),
        a: R.Tensor(("b", "t", 8), "float32"),
        lin: R.Tensor((8, 5), "float32"),
        lin3: R.Tensor((1, 8, 5), "float32"),
        q: R.Tensor(("b", 3, "t", 8), "float32"),
        k: R.Tensor(("b", 3, "t", 8), "float32"),
    ):
        b = T.int64()
        with R.dataflow():
            c = R.nn.conv1d(x, w, strides=2, padding=[1, 2], dilation=3, groups=2)
            ct = R.nn.conv1d_transpose(c, wt, strides=2, padding=[1, 1], output_padding=[1], dilation=1, groups=3)
            y = R.matmul(a, lin)  # a linear layer
            y3 = R.matmul(a, lin3)  # the same, as torch's bmm decomposition writes it
            lb = R.broadcast_to(lin, R.shape([b, 8, 5]))  # ... and with a symbolic batch
            yb = R.matmul(a, lb)
            kt = R.permute_dims(k, axes=[0, 1, 3, 2])  # attention: q @ (k * 0.5)^T
            ks = R.multiply(kt, R.const(0.5, "float32"))
            s = R.matmul(q, ks)
            R.output(ct, y, y3, yb, s)
        return ct, y, y3, yb, s


@I.ir_module
class Dispatched:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((6, 2, 3), "float32"),
        wt: R.Tensor((6, 2, 4), "float32"),
        a: R.Tensor(("b", "t", 8), "float32"),
        lin: R.Tensor((8, 5), "float32"),
        lin3: R.Tensor((1, 8, 5), "float32"),
        q: R.Tensor(("b", 3, "t", 8), "float32"),
        k: R.Tensor(("b", 3, "t", 8), "float32"),
    ):
        b, t, n = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            # stride, pad_left, pad_right, dilation, groups, has_bias, x, w
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (2, 1, 2, 3, 2, 0, x, w), out_ty=R.Tensor((1, 6, n // 2 - 1), "float32")
            )
            # stride, pad_left, pad_right, output_padding, dilation, groups, has_bias, x, w
            ct = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose",
                (2, 1, 1, 1, 1, 3, 0, c, wt),
                out_ty=R.Tensor((1, 6, n // 2 * 2 - 1), "float32"),
            )
            # has_bias, x, w
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin), out_ty=R.Tensor((b, t, 5), "float32"))
            lin2 = R.reshape(lin3, R.shape([8, 5]))
            y3 = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin2), out_ty=R.Tensor((b, t, 5), "float32"))
            lb = R.broadcast_to(lin, R.shape([b, 8, 5]))  # dead now
            yb = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, a, lin), out_ty=R.Tensor((b, t, 5), "float32"))
            kt = R.permute_dims(k, axes=[0, 1, 3, 2])  # dead now
            ks = R.multiply(kt, R.const(0.5, "float32"))  # dead now
            k_scaled = R.multiply(k, R.const(0.5, "float32"))
            # trans_x, trans_y, x, y: k^T read through strides, not copied
            s = R.call_dps_packed(
                "kokoro_tvm_ext.batch_matmul", (0, 1, q, k_scaled), out_ty=R.Tensor((b, 3, t, t), "float32")
            )
            R.output(ct, y, y3, yb, s)
        return ct, y, y3, yb, s


def test_heavy_ops_become_kernel_calls():
    out = DispatchToPluginKernels()(Heavy)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, Dispatched)


@I.ir_module
class NotForTheKernels:
    @R.function
    def main(
        x: R.Tensor((1, 4, 9), "float32"),
        w: R.Tensor((6, 4, 3), "float32"),
        xh: R.Tensor((1, 4, 9), "float16"),
        wh: R.Tensor((6, 4, 3), "float16"),
        xw: R.Tensor((1, 9, 4), "float32"),
        a: R.Tensor((2, 8), "int32"),
        m: R.Tensor((8, 5), "int32"),
        v: R.Tensor((8,), "float32"),
        f: R.Tensor((2, 8), "float32"),
        g: R.Tensor((8, 5), "float32"),
    ):
        with R.dataflow():
            half = R.nn.conv1d(xh, wh)  # float16
            nwc = R.nn.conv1d(xw, w, data_layout="NWC")  # another layout
            wide = R.nn.conv1d(x, w, out_dtype="float64")  # another output dtype
            ints = R.matmul(a, m)  # not float
            vec = R.matmul(f, v)  # a 1-D right-hand side
            out64 = R.matmul(f, g, out_dtype="float64")
            R.output(half, nwc, wide, ints, vec, out64)
        return half, nwc, wide, ints, vec, out64


def test_other_dtypes_layouts_and_ranks_are_left_to_tvm():
    tvm.ir.assert_structural_equal(DispatchToPluginKernels()(NotForTheKernels), NotForTheKernels)


@I.ir_module
class Blocks:
    @R.function
    def main(q: R.Tensor((2, 4, 8), "float32"), k: R.Tensor((2, 4, 8), "float32")):
        with R.dataflow():
            k2 = R.add(k, k)
            kt = R.permute_dims(k2, axes=[0, 2, 1])
            R.output(kt)
        kt2 = R.add(kt, kt)  # a plain binding between the two blocks
        with R.dataflow():
            s = R.matmul(q, kt)  # k2 is out of scope here: kt is read as it is
            qt = R.permute_dims(q, axes=[0, 2, 1])  # dead now
            s2 = R.matmul(q, qt)  # in scope: read through strides
            R.output(s, s2)
        return (kt2, s, s2)


@I.ir_module
class BlocksDispatched:
    @R.function
    def main(q: R.Tensor((2, 4, 8), "float32"), k: R.Tensor((2, 4, 8), "float32")):
        with R.dataflow():
            k2 = R.add(k, k)
            kt = R.permute_dims(k2, axes=[0, 2, 1])
            R.output(kt)
        kt2 = R.add(kt, kt)
        with R.dataflow():
            s = R.call_dps_packed("kokoro_tvm_ext.batch_matmul", (0, 0, q, kt), out_ty=R.Tensor((2, 4, 4), "float32"))
            qt = R.permute_dims(q, axes=[0, 2, 1])  # dead now
            s2 = R.call_dps_packed("kokoro_tvm_ext.batch_matmul", (0, 1, q, q), out_ty=R.Tensor((2, 4, 4), "float32"))
            R.output(s, s2)
        return (kt2, s, s2)


def test_a_transpose_from_an_earlier_block_is_not_looked_through():
    out = DispatchToPluginKernels()(Blocks)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, BlocksDispatched)


@I.ir_module
class Softmaxes:
    @R.function
    def main(s: R.Tensor(("b", 3, "t", "t"), "float32"), h: R.Tensor((2, 5), "float16")):
        with R.dataflow():
            last = R.nn.softmax(s, axis=-1)  # attention's rows
            last4 = R.nn.softmax(s, axis=3)  # the same axis, counted from the front
            other = R.nn.softmax(s, axis=2)  # not the last axis: TVM's
            half = R.nn.softmax(h, axis=-1)  # float16: TVM's
            R.output(last, last4, other, half)
        return last, last4, other, half


@I.ir_module
class SoftmaxesDispatched:
    @R.function
    def main(s: R.Tensor(("b", 3, "t", "t"), "float32"), h: R.Tensor((2, 5), "float16")):
        b, t = T.int64(), T.int64()
        with R.dataflow():
            last = R.call_dps_packed("kokoro_tvm_ext.softmax", (s,), out_ty=R.Tensor((b, 3, t, t), "float32"))
            last4 = R.call_dps_packed("kokoro_tvm_ext.softmax", (s,), out_ty=R.Tensor((b, 3, t, t), "float32"))
            other = R.nn.softmax(s, axis=2)
            half = R.nn.softmax(h, axis=-1)
            R.output(last, last4, other, half)
        return last, last4, other, half


def test_a_float32_softmax_over_the_last_axis_becomes_the_kernel_and_others_stay_with_tvm():
    out = DispatchToPluginKernels()(Softmaxes)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, SoftmaxesDispatched)
