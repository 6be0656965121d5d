"""The plugin's float32 ``conv1d`` calls whose shapes Winograd's F(m, r) speeds
up move to ``kokoro_tvm_ext.conv1d_winograd``, with their weights transformed
once, here, at compile time (``kokoro_tvm_ext.pack_winograd``; the transforms
and the kernel are in tvm-ext/src/conv/winograd/).

Which calls (stride 1, one group, weights that are constants or computed from
the weight parameters alone (_relax_utils.WeightPacker), 3, 5, 7 or 11 taps), by
the kernel's measured speed against the im2col GEMM on 2 threads
(``cargo test -p tvm-ext --release winograd_speed -- --ignored --nocapture``):
with 128 to 512 channels in and at least 128 out it is 1.2-2.2x faster (the
vocoder's residual blocks, undilated ones and F(4,7) gaining most; Kokoro has
no narrower convolution that could go). Wider inputs (Kokoro's 1024-channel
decoder) stay on the GEMM: their transformed weights take 8/3 the memory, and
at the ~100 frames of a short sentence the kernel is slower (0.8x; its GEMMs
are too narrow).

Calls upstream of a cumulative sum stay on the GEMM too: the transforms round
more (relative error 1e-6 to 1.3e-5 against 3e-7), and in Kokoro that sum
integrates the F0 curve into the phase of its sines, where an error grows
with the length of the audio (see pack_bf16.py).

Runs after FoldConstant (weight norm is folded by then) and before
PackWeightsBF16, so with precision="bf16" the calls it takes stay f32: on an
Intel Xeon without AMX (VDPBF16PS at half the f32 FMA rate) the bf16 GEMM runs
at ~0.6x the f32 one and Winograd at 1.2-2x; on AMD Zen 4 (full rate, bf16
GEMM 2.1x f32) bf16 direct convolutions in their place were only 2% faster end
to end, and Winograd with bf16 GEMMs rounds too much in the transform domain
(24 dB SNR end to end against our fp32, where the bf16 mode has 33 dB).
"""

from __future__ import annotations

import tvm
from tvm.relax.expr_functor import PyExprMutator, mutator

from kokoro_tvm_ext.plugin.kernels import KernelCall
from kokoro_tvm_ext.plugin.passes._relax_utils import WeightPacker, is_among, map_functions, upstream_of_cumsum

KERNEL_SIZES = (3, 5, 7, 11)
MIN_CHANNELS = 128
MAX_IN_CHANNELS = 512


def worth_it(out_channels: int, in_channels: int, kernel_size: int) -> bool:
    """Whether a stride-1, ungrouped conv1d of this shape goes to Winograd."""
    return (
        kernel_size in KERNEL_SIZES and MIN_CHANNELS <= in_channels <= MAX_IN_CHANNELS and out_channels >= MIN_CHANNELS
    )


@mutator
class _ToWinograd(PyExprMutator):
    def __init__(self, mod, func, keep: dict):
        super().__init__(mod)
        self.weights = WeightPacker(self, func)
        self.keep = keep

    def visit_call_(self, call):
        if is_among(self.keep, call):
            return super().visit_call_(call)
        call = super().visit_call_(call)
        kernel = KernelCall.read(call)
        if kernel is None or kernel.name != "conv1d" or kernel["stride"] != 1 or kernel["groups"] != 1:
            return call
        found = self.weights.weight_type(kernel["w"])
        if found is None or found[1] != "float32":
            return call
        cout, cin, k = found[0]
        if not worth_it(cout, cin, k):
            return call
        packed = self.weights.pack(kernel["w"], "kokoro_tvm_ext.pack_winograd")
        return kernel.to("conv1d_winograd", w=packed, kernel_size=k)


@tvm.transform.module_pass(opt_level=0, name="PackWeightsWinograd")
class PackWeightsWinograd:
    """The f32 conv1d calls Winograd speeds up move to its kernel, weights transformed (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _ToWinograd(mod, func, upstream_of_cumsum(func)).visit_expr(func))
