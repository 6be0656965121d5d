"""RemoveNoOpCopies: data movement that provably changes nothing is dropped, the rest kept."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.passes.remove_noop_copies import RemoveNoOpCopies
from tvm_build import build_vm


@I.ir_module
class Copies:
    @R.function
    def main(n: R.Tensor(("s",), "float32"), x: R.Tensor((1, 3, "s * 120 + 1"), "float32")):
        s = T.int64()
        with R.dataflow():
            # The same shape, spelled as torch.export spells it elsewhere: dropped.
            a = R.reshape(x, R.shape([1, 3, 1 + 120 * s]))
            b = R.add(a, a)
            c = R.broadcast_to(b, R.shape([1, 3, s * 120 + 1]))  # dropped
            d = R.permute_dims(c, axes=[0, 1, 2])  # dropped
            e = R.permute_dims(d, axes=[2, 0, 1])
            f = R.permute_dims(e, axes=[1, 2, 0])  # undoes e: dropped with it
            g = R.astype(f, "float32")  # dropped
            h = R.permute_dims(g, axes=[0, 2, 1])  # a real transpose: kept
            i = R.reshape(h, R.shape([s * 120 + 1, 3]))  # a real reshape: kept
            j = R.broadcast_to(i, R.shape([2, s * 120 + 1, 3]))  # a real broadcast: kept
            R.output(j)
        return j


def _ops(mod) -> list[str]:
    ops = []

    @relax.expr_functor.visitor
    class Collect(relax.expr_functor.PyExprVisitor):
        def visit_call_(self, call):
            ops.append(str(call.op.name))

    Collect().visit_expr(mod["main"])
    return ops


def _removed(mod):
    # The pipeline runs DeadCodeElimination later; a cancelled permute pair leaves its first half dead.
    return tvm.transform.Sequential([RemoveNoOpCopies, relax.transform.DeadCodeElimination()])(mod)


def test_noop_copies_are_dropped_and_real_ones_kept():
    out = _removed(Copies)
    assert relax.analysis.check_well_formed(out)
    ops = _ops(out)
    assert ops.count("relax.reshape") == 1 and ops.count("relax.broadcast_to") == 1
    assert ops.count("relax.permute_dims") == 1 and "relax.astype" not in ops
    assert ops.count("relax.add") == 1


def test_numbers_are_unchanged(rng):
    before, after = build_vm(Copies), build_vm(_removed(Copies))
    for s in (1, 2):
        n = np.zeros(s, np.float32)
        x = rng.standard_normal((1, 3, 120 * s + 1)).astype(np.float32)
        args = [tvm.runtime.tensor(a) for a in (n, x)]
        want = before["main"](*args).numpy()
        np.testing.assert_array_equal(after["main"](*args).numpy(), want)
        np.testing.assert_array_equal(want[0], (2 * x[0]).T)


@I.ir_module
class EscapingOutput:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            a = R.add(x, x)
            # An output of the block that is a no-op of a dataflow var: kept, so
            # the dataflow var does not escape the block.
            b = R.reshape(a, R.shape([2, 3]))
            R.output(b)
        return b


def test_block_outputs_stay_well_formed():
    out = _removed(EscapingOutput)
    assert relax.analysis.check_well_formed(out)
    assert _ops(out) == ["relax.add", "relax.reshape"]


@I.ir_module
class PermuteAcrossBlocks:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            x2 = R.add(x, x)
            a = R.permute_dims(x2, axes=[1, 0])
            R.output(a)
        a2 = R.add(a, a)  # a plain binding between the two blocks
        with R.dataflow():
            # Undoes a, but x2 belongs to the first block: kept.
            b = R.permute_dims(a, axes=[1, 0])
            c = R.add(b, b)
            R.output(c)
        return (a2, c)


def test_cancelling_permutes_across_blocks_stay_well_formed():
    out = _removed(PermuteAcrossBlocks)
    assert relax.analysis.check_well_formed(out)
    assert _ops(out).count("relax.permute_dims") == 2
