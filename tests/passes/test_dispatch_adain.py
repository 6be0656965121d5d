"""DispatchAdaIN alone: AdaIN chains (with Snake or leaky_relu after them) become one call to the fused
kernel, written out below argument by argument; chains that are not exactly that computation stay."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.dispatch_adain import DispatchAdaIN


def dispatched(mod):
    # The pass leaves the chains' intermediates dead; DeadCodeElimination follows it in the pipeline.
    return relax.transform.DeadCodeElimination()(DispatchAdaIN()(mod))


@I.ir_module
class Chains:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((4,), "float32"),
        b: R.Tensor((4,), "float32"),
        scale: R.Tensor((1, 4, 1), "float32"),
        shift: R.Tensor((1, 4, 1), "float32"),
        alpha: R.Tensor((1, 4, 1), "float32"),
    ):
        with R.dataflow():
            inv = R.divide(R.const(1.0, "float32"), alpha)
            # AdaIN + Snake (AdaINResBlock1)
            n1 = R.nn.instance_norm(x, w, b, channel_axis=1, axes=[0, 2], epsilon=1e-5)
            m1 = R.multiply(scale, n1)
            y1 = R.add(m1, shift)
            t1 = R.multiply(alpha, y1)
            s1 = R.sin(t1)
            p1 = R.power(s1, R.const(2.0, "float32"))
            q1 = R.multiply(inv, p1)
            z1 = R.add(y1, q1)
            # AdaIN + leaky_relu (AdainResBlk1d), operands the other way round
            n2 = R.nn.instance_norm(z1, w, b, channel_axis=1, axes=[2], epsilon=1e-5)
            m2 = R.multiply(n2, scale)
            y2 = R.add(shift, m2)
            z2 = R.nn.leakyrelu(y2, alpha=0.2)
            # a bare AdaIN without the norm's affine
            n3 = R.nn.instance_norm(z2, w, b, channel_axis=1, axes=[2], epsilon=1e-3, center=False, scale=False)
            m3 = R.multiply(scale, n3)
            y3 = R.add(m3, shift)
            R.output(y3)
        return y3


@I.ir_module
class Fused:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((4,), "float32"),
        b: R.Tensor((4,), "float32"),
        scale: R.Tensor((1, 4, 1), "float32"),
        shift: R.Tensor((1, 4, 1), "float32"),
        alpha: R.Tensor((1, 4, 1), "float32"),
    ):
        n = T.int64()
        with R.dataflow():
            # act (0 none, 1 snake, 2 leaky_relu), affine, eps, slope, x, [w, b], scale, shift, [alpha]
            z1 = R.call_dps_packed(
                "kokoro_tvm_ext.adain",
                (1, 1, T.float64(1e-5), T.float64(0.0), x, w, b, scale, shift, alpha),
                out_ty=R.Tensor((1, 4, n), "float32"),
            )
            z2 = R.call_dps_packed(
                "kokoro_tvm_ext.adain",
                (2, 1, T.float64(1e-5), T.float64(0.2), z1, w, b, scale, shift),
                out_ty=R.Tensor((1, 4, n), "float32"),
            )
            y3 = R.call_dps_packed(
                "kokoro_tvm_ext.adain",
                (0, 0, T.float64(1e-3), T.float64(0.0), z2, scale, shift),
                out_ty=R.Tensor((1, 4, n), "float32"),
            )
            R.output(y3)
        return y3


def test_the_three_chains_become_one_call_each():
    out = dispatched(Chains)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, Fused)


@I.ir_module
class SnakeLeaks:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        scale: R.Tensor((1, 4, 1), "float32"),
        shift: R.Tensor((1, 4, 1), "float32"),
        alpha: R.Tensor((1, 4, 1), "float32"),
    ):
        with R.dataflow():
            inv = R.divide(R.const(1.0, "float32"), alpha)
            n1 = R.nn.instance_norm(
                x,
                R.ones((4,), "float32"),
                R.zeros((4,), "float32"),
                channel_axis=1,
                axes=[2],
                epsilon=1e-5,
                center=False,
                scale=False,
            )
            m1 = R.multiply(scale, n1)
            y1 = R.add(m1, shift)
            t1 = R.multiply(alpha, y1)
            s1 = R.sin(t1)  # also an output of the block: the Snake cannot be fused
            p1 = R.power(s1, R.const(2.0, "float32"))
            q1 = R.multiply(inv, p1)
            z1 = R.add(y1, q1)
            R.output(z1, s1)
        return z1, s1


@I.ir_module
class SnakeLeaksFused:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        scale: R.Tensor((1, 4, 1), "float32"),
        shift: R.Tensor((1, 4, 1), "float32"),
        alpha: R.Tensor((1, 4, 1), "float32"),
    ):
        n = T.int64()
        with R.dataflow():
            inv = R.divide(R.const(1.0, "float32"), alpha)
            # Only the AdaIN, without activation.
            y1 = R.call_dps_packed(
                "kokoro_tvm_ext.adain",
                (0, 0, T.float64(1e-5), T.float64(0.0), x, scale, shift),
                out_ty=R.Tensor((1, 4, n), "float32"),
            )
            t1 = R.multiply(alpha, y1)
            s1 = R.sin(t1)
            p1 = R.power(s1, R.const(2.0, "float32"))
            q1 = R.multiply(inv, p1)
            z1 = R.add(y1, q1)
            R.output(z1, s1)
        return z1, s1


def test_a_snake_whose_intermediate_is_used_elsewhere_leaves_only_the_adain():
    tvm.ir.assert_structural_equal(dispatched(SnakeLeaks), SnakeLeaksFused)


@I.ir_module
class NotAdaIN:
    @R.function
    def main(
        x: R.Tensor((1, 4, 6), "float32"),
        x2: R.Tensor((2, 4, 6), "float32"),
        xh: R.Tensor((1, 4, 6), "float16"),
        w: R.Tensor((4,), "float32"),
        b: R.Tensor((4,), "float32"),
        wh: R.Tensor((4,), "float16"),
        scale: R.Tensor((1, 4, 1), "float32"),
        shift: R.Tensor((1, 4, 1), "float32"),
        scaleh: R.Tensor((1, 4, 1), "float16"),
        per_step: R.Tensor((1, 4, 6), "float32"),
    ):
        with R.dataflow():
            # instance_norm's output read twice
            n1 = R.nn.instance_norm(x, w, b, channel_axis=1, axes=[2])
            y1 = R.add(R.multiply(scale, n1), shift)
            r1 = R.add(y1, n1)
            # normalized over the batch too, with a batch of 2
            n2 = R.nn.instance_norm(x2, w, b, channel_axis=1, axes=[0, 2])
            y2 = R.add(R.multiply(scale, n2), shift)
            # float16
            n3 = R.nn.instance_norm(xh, wh, wh, channel_axis=1, axes=[2])
            y3 = R.add(R.multiply(scaleh, n3), scaleh)
            # a scale per time step, not per channel
            n4 = R.nn.instance_norm(x, w, b, channel_axis=1, axes=[2])
            y4 = R.add(R.multiply(per_step, n4), shift)
            # channels on the last axis
            n5 = R.nn.instance_norm(x, R.ones((6,), "float32"), R.zeros((6,), "float32"), channel_axis=2, axes=[1])
            y5 = R.add(R.multiply(scale, n5), shift)
            R.output(r1, y2, y3, y4, y5)
        return r1, y2, y3, y4, y5


def test_what_is_not_exactly_adain_is_left_to_tvm():
    # (The parser binds each nested call to a variable, as the importer does.)
    tvm.ir.assert_structural_equal(DispatchAdaIN()(NotAdaIN), NotAdaIN)


def _snake_with_folded_inverse(alpha: np.ndarray, inv: np.ndarray):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, 6], "float32"))
    scale = relax.Var("scale", relax.TensorType([1, 4, 1], "float32"))
    with bb.function("main", [x, scale]):
        with bb.dataflow():
            a = relax.const(alpha)
            n = bb.emit(
                relax.op.nn.instance_norm(
                    x, relax.const(np.ones(4, np.float32)), relax.const(np.zeros(4, np.float32)), 1, [2]
                )
            )
            y = bb.emit(relax.op.add(bb.emit(relax.op.multiply(scale, n)), scale))
            p = bb.emit(
                relax.op.power(bb.emit(relax.op.sin(bb.emit(relax.op.multiply(a, y)))), relax.const(2.0, "float32"))
            )
            z = bb.emit_output(relax.op.add(y, bb.emit(relax.op.multiply(relax.const(inv), p))))
        bb.emit_func_output(z)
    return bb.get()


def test_snake_is_found_after_constant_folding_by_value():
    alpha = np.array([0.5, 1.5, 2.0, 3.0], np.float32).reshape(1, 4, 1)
    folded = dispatched(_snake_with_folded_inverse(alpha, np.float32(1) / alpha))
    calls = [b.value for b in folded["main"].body.blocks[0].bindings]
    assert len(calls) == 1 and calls[0].args[0].global_symbol == "kokoro_tvm_ext.adain"
    assert int(calls[0].args[1].fields[0].value) == 1  # snake
    # 1/alpha off by one ulp somewhere: not the inverse of alpha, no Snake.
    wrong = (np.float32(1) / alpha).copy()
    wrong[0, 2, 0] = np.nextafter(wrong[0, 2, 0], np.float32(1))
    kept = dispatched(_snake_with_folded_inverse(alpha, wrong))
    acts = [
        int(b.value.args[1].fields[0].value)
        for b in kept["main"].body.blocks[0].bindings
        if isinstance(b.value, relax.Call) and b.value.op == tvm.ir.Op.get("relax.call_dps_packed")
    ]
    assert acts == [0]
