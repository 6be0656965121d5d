"""RemoveNoOpCopies alone: data movement that provably changes nothing is dropped, the rest kept."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
from tvm_build import build_vm

from kokoro_tvm_ext.plugin.passes.remove_noop_copies import RemoveNoOpCopies


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
            f = R.permute_dims(e, axes=[1, 2, 0])  # undoes e: dropped (e is left dead)
            g = R.astype(f, "float32")  # dropped
            h = R.permute_dims(g, axes=[0, 2, 1])  # a real transpose: kept
            i = R.reshape(h, R.shape([s * 120 + 1, 3]))  # a real reshape: kept
            j = R.broadcast_to(i, R.shape([2, s * 120 + 1, 3]))  # a real broadcast: kept
            k = R.astype(j, "float16")  # a real cast: kept
            R.output(k)
        return k


@I.ir_module
class CopiesRemoved:
    @R.function
    def main(n: R.Tensor(("s",), "float32"), x: R.Tensor((1, 3, "s * 120 + 1"), "float32")):
        s = T.int64()
        with R.dataflow():
            b = R.add(x, x)
            e = R.permute_dims(b, axes=[2, 0, 1])  # dead; the pipeline runs DCE later
            h = R.permute_dims(b, axes=[0, 2, 1])
            i = R.reshape(h, R.shape([s * 120 + 1, 3]))
            j = R.broadcast_to(i, R.shape([2, s * 120 + 1, 3]))
            k = R.astype(j, "float16")
            R.output(k)
        return k


def test_noop_copies_are_dropped_and_real_ones_kept():
    out = RemoveNoOpCopies()(Copies)
    assert relax.analysis.check_well_formed(out)
    tvm.ir.assert_structural_equal(out, CopiesRemoved)


def test_numbers_are_unchanged(rng):
    before, after = build_vm(Copies), build_vm(RemoveNoOpCopies()(Copies))
    for s in (1, 2):
        n = np.zeros(s, np.float32)
        x = rng.standard_normal((1, 3, 120 * s + 1)).astype(np.float32)
        args = [tvm.runtime.tensor(a) for a in (n, x)]
        want = before["main"](*args).numpy()
        np.testing.assert_array_equal(after["main"](*args).numpy(), want)
        np.testing.assert_array_equal(want[0].astype(np.float32), (2 * x[0]).T.astype(np.float16))


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


@I.ir_module
class RealOps:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor(("n", 3), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.reshape(x, R.shape([3, 2]))  # same size, another shape
            b = R.broadcast_to(x, R.shape([4, 2, 3]))
            c = R.permute_dims(x, axes=[1, 0])
            e = R.reshape(y, R.shape([n * 3]))  # rank changes
            f = R.astype(x, "int32")
            R.output(a, b, c, e, f)
        return (a, b, c, e, f)


def test_what_the_pass_leaves_alone():
    for mod in (EscapingOutput, PermuteAcrossBlocks, RealOps):
        out = RemoveNoOpCopies()(mod)
        assert relax.analysis.check_well_formed(out)
        tvm.ir.assert_structural_equal(out, mod)
