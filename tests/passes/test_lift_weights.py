"""LiftWeights: large constants become trailing parameters, stored in weights.bin and mapped back."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R

from kokoro_tvm_ext.model.runtime.weights import load_weights, write_weights
from kokoro_tvm_ext.plugin.passes.lift_weights import LiftWeights


def _tensor(shape, seed=0, dtype="float32"):
    return tvm.runtime.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


@I.ir_module
class Weighted:
    @R.function
    def main(
        x: R.Tensor((4, 1024), "float32"), big: R.Tensor((4, 1024), "float32"), small: R.Tensor((1, 1024), "float32")
    ):
        with R.dataflow():
            y = R.add(x, big)
            z = R.multiply(y, small)
            out = R.add(z, big)  # the same constant twice
            R.output(out)
        return out


@I.ir_module
class Lifted:
    @R.function
    def main(
        x: R.Tensor((4, 1024), "float32"),
        small: R.Tensor((1, 1024), "float32"),
        weight0: R.Tensor((4, 1024), "float32"),
    ):
        with R.dataflow():
            y = R.add(x, weight0)
            z = R.multiply(y, small)
            out = R.add(z, weight0)  # one parameter
            R.output(out)
        return out


def _bind(mod, **values):
    return relax.transform.BindParams("main", values)(mod)


def test_large_constants_become_parameters_and_small_ones_stay():
    big, small = _tensor((4, 1024)), _tensor((1, 1024), seed=1)  # 16 KB and 4 KB
    sink = {}
    after = LiftWeights(sink, min_bytes=8192)(_bind(Weighted, big=big, small=small))
    tvm.ir.assert_structural_equal(after, _bind(Lifted, small=small))
    assert len(sink["main"]) == 1 and sink["main"][0].same_as(big)


def test_a_function_without_large_constants_is_unchanged():
    before = _bind(Weighted, big=_tensor((4, 1024)), small=_tensor((1, 1024), seed=1))
    sink = {}
    tvm.ir.assert_structural_equal(LiftWeights(sink, min_bytes=1 << 20)(before), before)
    assert sink == {"main": []}


def test_weights_file_round_trip_keeps_bytes_dtypes_alignment_and_sharing(tmp_path):
    f32 = _tensor((3, 5, 7))
    i64 = tvm.runtime.tensor(np.arange(9, dtype=np.int64).reshape(3, 3))
    bits = np.random.default_rng(2).integers(0, 1 << 16, (6, 10), dtype=np.uint16)
    bf16 = tvm.runtime.tensor(bits)._create_view((6, 10), "bfloat16")
    f32_copy = tvm.runtime.tensor(f32.numpy())  # another tensor, the same bytes
    index = write_weights(tmp_path / "weights.bin", {"a": [f32, i64], "b": [bf16, f32_copy]})
    assert [e[0] % 64 for entries in index.values() for e in entries] == [0, 0, 0, 0]
    assert index["a"][0] == index["b"][1]  # stored once
    assert (tmp_path / "weights.bin").stat().st_size < f32.numpy().nbytes * 2
    loaded = load_weights(tmp_path / "weights.bin", index, tvm)
    np.testing.assert_array_equal(loaded["a"][0].numpy(), f32.numpy())
    np.testing.assert_array_equal(loaded["a"][1].numpy(), i64.numpy())
    assert str(loaded["b"][0].dtype) == "bfloat16" and tuple(loaded["b"][0].shape) == (6, 10)
    np.testing.assert_array_equal(loaded["b"][0]._create_view((6, 10), "uint16").numpy(), bits)
    assert loaded["b"][1] is loaded["a"][0]  # one mapping, one tensor
