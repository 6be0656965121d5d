"""PackWeightsWinograd alone: which f32 conv1d calls move to the Winograd kernel, with their weights
transformed at compile time (by the plugin's pack_winograd; the transform is tested in tests/kernels)."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.passes.pack_winograd import PackWeightsWinograd, worth_it


def _weight(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bind(mod, **weights):
    return relax.transform.BindParams("main", weights)(mod)


def _transformed(w: np.ndarray):
    return tvm.get_global_func("kokoro_tvm_ext.pack_winograd")(tvm.runtime.tensor(w))


@I.ir_module
class Convolutions:
    @R.function
    def main(
        x: R.Tensor((1, 128, "n"), "float32"),
        w: R.Tensor((256, 128, 3), "float32"),
        b: R.Tensor((256,), "float32"),
        w7: R.Tensor((128, 256, 7), "float32"),
    ):
        n = T.int64()
        with R.dataflow():
            # stride, pad_left, pad_right, dilation, groups, has_bias, x, w, [bias]
            y = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 2, 2, 2, 1, 1, x, w, b), out_ty=R.Tensor((1, 256, n), "float32")
            )
            z = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 3, 3, 1, 1, 0, y, w7), out_ty=R.Tensor((1, 128, n), "float32")
            )
            R.output(z)
        return z


@I.ir_module
class Winograd:
    @R.function
    def main(
        x: R.Tensor((1, 128, "n"), "float32"),
        w: R.Tensor(dtype="float32"),
        b: R.Tensor((256,), "float32"),
        w7: R.Tensor(dtype="float32"),
    ):
        n = T.int64()
        with R.dataflow():
            # stride, pad_left, pad_right, dilation, groups, has_bias, kernel_size, x, transformed w, [bias]
            y = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_winograd",
                (1, 2, 2, 2, 1, 1, 3, x, w, b),
                out_ty=R.Tensor((1, 256, n), "float32"),
            )
            z = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d_winograd", (1, 3, 3, 1, 1, 0, 7, y, w7), out_ty=R.Tensor((1, 128, n), "float32")
            )
            R.output(z)
        return z


def test_wide_stride_one_convolutions_go_winograd():
    w, w7 = _weight(256, 128, 3), _weight(128, 256, 7, seed=1)
    out = PackWeightsWinograd()(_bind(Convolutions, w=w, w7=w7))
    tvm.ir.assert_structural_equal(out, _bind(Winograd, w=_transformed(w), w7=_transformed(w7)))


@I.ir_module
class NotForWinograd:
    @R.function
    def main(
        x: R.Tensor((1, 128, 64), "float32"),
        w: R.Tensor((128, 128, 3), "float32"),
        wg: R.Tensor((128, 64, 3), "float32"),
        w4: R.Tensor((128, 128, 4), "float32"),
        thin: R.Tensor((64, 128, 3), "float32"),
        wide: R.Tensor((1024, 1024, 3), "float32"),
        x1024: R.Tensor((1, 1024, 64), "float32"),
        f0: R.Tensor((128, 128, 3), "float32"),
        unbound: R.Tensor((128, 128, 3), "float32"),
    ):
        with R.dataflow():
            strided = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (2, 1, 1, 1, 1, 0, x, w), out_ty=R.Tensor((1, 128, 32), "float32")
            )
            grouped = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 2, 0, x, wg), out_ty=R.Tensor((1, 128, 64), "float32")
            )
            four_taps = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 2, 1, 1, 0, x, w4), out_ty=R.Tensor((1, 128, 64), "float32")
            )
            narrow = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, thin), out_ty=R.Tensor((1, 64, 64), "float32")
            )
            too_wide = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x1024, wide), out_ty=R.Tensor((1, 1024, 64), "float32")
            )
            not_constant = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, unbound), out_ty=R.Tensor((1, 128, 64), "float32")
            )
            # upstream of a cumulative sum: its rounding error would be integrated
            pitch = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, f0), out_ty=R.Tensor((1, 128, 64), "float32")
            )
            phase = R.cumsum(pitch, axis=2)
            R.output(strided, grouped, four_taps, narrow, too_wide, not_constant, phase)
        return strided, grouped, four_taps, narrow, too_wide, not_constant, phase


def test_what_stays_on_the_gemm():
    shapes = {
        "w": (128, 128, 3),
        "wg": (128, 64, 3),
        "w4": (128, 128, 4),
        "thin": (64, 128, 3),
        "wide": (1024, 1024, 3),
        "f0": (128, 128, 3),
    }
    before = _bind(NotForWinograd, **{name: _weight(*shape, seed=i) for i, (name, shape) in enumerate(shapes.items())})
    tvm.ir.assert_structural_equal(PackWeightsWinograd()(before), before)


def test_the_rule_follows_the_measured_shapes():
    assert worth_it(256, 256, 3) and worth_it(512, 512, 11) and worth_it(256, 300, 7)
    assert worth_it(128, 128, 7) and worth_it(128, 300, 3)
    assert not worth_it(64, 128, 5) and not worth_it(128, 64, 5)  # narrower: not measured in Kokoro, stays
    assert not worth_it(1024, 1024, 3)  # 8/3 the weight memory, slower on short inputs
    assert not worth_it(256, 256, 4)  # no transform for 4 taps
