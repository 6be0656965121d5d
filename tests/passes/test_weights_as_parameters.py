"""The packing passes on weights that are parameters (a model imported with ``keep_params_as_input``, as
compile_kokoro does): the kernels called are the ones constant weights get, and the packing moves, through
LiftTransformParams, into ``main_transform_params``, whose results equal the plugin's packers run directly
on the same weights (what the constant path stores)."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T

import kokoro_tvm_ext._native  # noqa: F401  (the packers)
from kokoro_tvm_ext.plugin.kernels import KernelCall
from kokoro_tvm_ext.plugin.passes.pack_bf16 import PackWeightsBF16
from kokoro_tvm_ext.plugin.passes.pack_f32 import PackWeightsF32
from kokoro_tvm_ext.plugin.passes.pack_winograd import PackWeightsWinograd


@I.ir_module
class Products:
    @R.function
    def main(
        x: R.Tensor((1, 128, "n"), "float32"),
        w: R.Tensor((128, 128, 3), "float32"),  # Winograd's (3 taps, 128 channels)
        v: R.Tensor((128, 128, 1), "float32"),  # not Winograd's: bf16's in that mode
        lin: R.Tensor((128, 64), "float32"),
    ):
        R.func_attr({"num_input": 1})
        n = T.int64()
        with R.dataflow():
            wt = R.permute_dims(w, axes=[0, 1, 2])  # a weight computed from a parameter, as weight norm is
            # stride, pad_left, pad_right, dilation, groups, has_bias, x, w
            a = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 1, 1, 1, 1, 0, x, wt), out_ty=R.Tensor((1, 128, n), "float32")
            )
            c = R.call_dps_packed(
                "kokoro_tvm_ext.conv1d", (1, 0, 0, 1, 1, 0, a, v), out_ty=R.Tensor((1, 128, n), "float32")
            )
            t = R.permute_dims(c, axes=[0, 2, 1])
            y = R.call_dps_packed("kokoro_tvm_ext.matmul", (0, t, lin), out_ty=R.Tensor((1, n, 64), "float32"))
            R.output(y)
        return y


def _kernels(func) -> list[str]:
    found = []
    relax.analysis.post_order_visit(func, lambda e: found.append(KernelCall.read(e)))
    return [k.name for k in found if k is not None]


def _lifted(passes):
    mod = tvm.transform.Sequential([*passes, relax.transform.LiftTransformParams()])(Products)
    transform = tvm.IRModule({"main_transform_params": mod["main_transform_params"]})
    return mod, relax.VirtualMachine(tvm.compile(transform, target="llvm"), tvm.cpu())


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in ((128, 128, 3), (128, 128, 1), (128, 64))]


def test_winograd_packs_a_parameter_weight_in_transform_params():
    mod, vm = _lifted([PackWeightsWinograd()])
    assert _kernels(mod["main"]) == ["conv1d_winograd", "conv1d", "matmul"]
    w, v, lin = _weights()
    results = vm["main_transform_params"]([tvm.runtime.tensor(a) for a in (w, v, lin)])
    want = tvm.get_global_func("kokoro_tvm_ext.pack_winograd")(tvm.runtime.tensor(w)).numpy()
    assert any(r.shape == want.shape and np.array_equal(r.numpy(), want) for r in results)


def test_bf16_packs_parameter_weights_with_the_kernels_name_and_groups():
    mod, vm = _lifted([PackWeightsWinograd(), PackWeightsBF16()])
    assert _kernels(mod["main"]) == ["conv1d_winograd", "conv1d_bf16", "matmul_bf16"]
    w, v, lin = _weights(1)
    results = [r.numpy() for r in vm["main_transform_params"]([tvm.runtime.tensor(a) for a in (w, v, lin)])]
    pack = tvm.get_global_func("kokoro_tvm_ext.pack_bf16")
    for kind, weight in (("conv1d", v), ("matmul", lin)):
        want = pack(kind, 1, tvm.runtime.tensor(weight))
        want = want._create_view(tuple(want.shape), "uint16").numpy() if "bfloat" in str(want.dtype) else want.numpy()
        got = [r.view(np.uint16) if r.dtype.itemsize == 2 else r for r in results]
        assert any(g.shape == want.shape and np.array_equal(g, want) for g in got), kind


def test_f32_panels_pack_a_parameter_matmul_weight_in_transform_params():
    mod, vm = _lifted([PackWeightsWinograd(), PackWeightsF32()])
    assert _kernels(mod["main"]) == ["conv1d_winograd", "conv1d", "matmul_panels"]
    w, v, lin = _weights(2)
    results = vm["main_transform_params"]([tvm.runtime.tensor(a) for a in (w, v, lin)])
    want = tvm.get_global_func("kokoro_tvm_ext.pack_f32")("matmul", 1, tvm.runtime.tensor(lin)).numpy()
    assert any(r.shape == want.shape and np.array_equal(r.numpy(), want) for r in results)
