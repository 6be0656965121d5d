"""PackWeightsBF16 alone: which plugin calls precision="bf16" moves to the bf16 kernels, with their
weights packed at compile time (by the plugin's pack_bf16; the packing is tested in tests/kernels)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.pack_bf16 import PRECISION_ATTR, PackWeightsBF16, check_precision


def _weight(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bind(mod, **weights):
    return relax.transform.BindParams("main", weights)(mod)


def _packed(kind: str, w: np.ndarray):
    return tvm.get_global_func("kokoro_tvm_ext.pack_bf16")(kind, 1, tvm.runtime.tensor(w))


@I.ir_module
class Products:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor((6, 4, 3), "float32"),
        b: R.Tensor((6,), "float32"),
        wt: R.Tensor((6, 5, 4), "float32"),
        lin: R.Tensor((5, 7), "float32"),
    ):
        n = T.int64()
        with R.dataflow():
            # stride, pad_left, pad_right, dilation, groups, has_bias, x, w, [bias]
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 1, x, w, b), out_ty=R.Tensor((1, 6, n), "float32")
            )
            # stride, pad_left, pad_right, output_padding, dilation, groups, has_bias, x, w
            ct = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose",
                (2, 1, 1, 0, 1, 1, 0, c, wt),
                out_ty=R.Tensor((1, 5, n * 2), "float32"),
            )
            t = R.permute_dims(ct, axes=[0, 2, 1])
            # has_bias, x, w
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, t, lin), out_ty=R.Tensor((1, n * 2, 7), "float32"))
            R.output(y)
        return y


@I.ir_module
class ProductsBF16:
    @R.function
    def main(
        x: R.Tensor((1, 4, "n"), "float32"),
        w: R.Tensor(dtype="bfloat16"),
        b: R.Tensor((6,), "float32"),
        wt: R.Tensor(dtype="bfloat16"),
        lin: R.Tensor(dtype="bfloat16"),
    ):
        n = T.int64()
        with R.dataflow():
            # the same, with the kernel size after the f32 kernels' prims
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_bf16", (1, 1, 1, 1, 1, 1, 3, x, w, b), out_ty=R.Tensor((1, 6, n), "float32")
            )
            ct = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_transpose_bf16",
                (2, 1, 1, 0, 1, 1, 0, 4, c, wt),
                out_ty=R.Tensor((1, 5, n * 2), "float32"),
            )
            t = R.permute_dims(ct, axes=[0, 2, 1])
            y = R.call_dps_packed("kokoro_tvm_ext.matmul_bf16", (0, t, lin), out_ty=R.Tensor((1, n * 2, 7), "float32"))
            R.output(y)
        return y


def _products():
    return {"w": _weight(6, 4, 3), "wt": _weight(6, 5, 4, seed=1), "lin": _weight(5, 7, seed=2)}


def test_constant_weight_products_go_bf16():
    weights = _products()
    out = PackWeightsBF16()(_bind(Products, **weights))
    want = _bind(
        ProductsBF16,
        w=_packed("conv1d", weights["w"]),
        wt=_packed("conv1d_transpose", weights["wt"]),
        lin=_packed("matmul", weights["lin"]),
    )
    tvm.ir.assert_structural_equal(out, want)


def test_a_function_marked_fp32_is_left_alone():
    before = _bind(Products, **_products())
    before["main"] = before["main"].with_attr(PRECISION_ATTR, "fp32")
    tvm.ir.assert_structural_equal(PackWeightsBF16()(before), before)


@I.ir_module
class StaysF32:
    @R.function
    def main(
        x: R.Tensor((1, 4, 16), "float32"),
        depthwise: R.Tensor((4, 1, 3), "float32"),
        f0: R.Tensor((1, 4, 3), "float32"),
        unbound: R.Tensor((4, 4, 3), "float32"),
    ):
        with R.dataflow():
            # grouped: runs a direct loop, not a GEMM
            d = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 4, 0, x, depthwise), out_ty=R.Tensor((1, 4, 16), "float32")
            )
            # a weight that is not a constant
            u = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, d, unbound), out_ty=R.Tensor((1, 4, 16), "float32")
            )
            # upstream of a cumulative sum: its rounding error would be integrated
            pitch = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, u, f0), out_ty=R.Tensor((1, 1, 16), "float32")
            )
            phase = R.cumsum(pitch, axis=2)
            R.output(phase)
        return phase


def test_grouped_unbound_and_phase_feeding_calls_stay_f32():
    before = _bind(StaysF32, depthwise=_weight(4, 1, 3), f0=_weight(1, 4, 3, seed=1))
    tvm.ir.assert_structural_equal(PackWeightsBF16()(before), before)


def test_unknown_precision_is_refused():
    assert check_precision("bf16") == "bf16"
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, int8, got 'fp16'"):
        check_precision("fp16")
