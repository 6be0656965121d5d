"""``precision="bf16"``: the plugin's conv1d / conv1d_transpose / matmul calls
with constant weights (or weights computed from the weight parameters alone,
see _relax_utils.WeightPacker) become their bf16 variants, with the weights packed to
bf16 once, here, at compile time (``kokoro_tvm_ext.pack_bf16``; the layout is
the Rust side's business, see tvm-ext/src/gemm/bf16/weights.rs).

Runs after FoldConstant, so weights computed from constants (weight norm)
are constants by then, and after PackWeightsWinograd, whose calls stay f32
(faster here, see pack_winograd.py). Calls it does not cover stay f32:

- grouped convolutions (depthwise ones run a direct loop, not a GEMM) and
  weights that are not constants;
- calls upstream of a cumulative sum: an error there is integrated, and grows
  with the input's length. In Kokoro that is the F0 predictor, whose output
  SineGen integrates into the phase of its sines: with bf16 F0 the waveform
  drifts out of phase within a second (SNR against fp32 under 10 dB), while
  the decoder after it takes bf16 at ~40 dB;
- every call in a function whose attribute ``kokoro_tvm_ext.precision`` is
  ``"fp32"`` (compile_kokoro keeps the text stage, which rounds durations to
  whole frames, in f32).
"""

from __future__ import annotations

import tvm
from tvm.relax.expr_functor import PyExprMutator, mutator

from kokoro_tvm_ext.plugin.kernels import KernelCall
from kokoro_tvm_ext.plugin.passes._relax_utils import WeightPacker, is_among, map_functions, upstream_of_cumsum

PRECISION_ATTR = "kokoro_tvm_ext.precision"
PRECISIONS = ("fp32", "bf16")

# The f32 kernels with a bf16 variant (named ``{kernel}_bf16``, packed as kind ``{kernel}``).
BF16_KERNELS = ("conv1d", "conv1d_transpose", "matmul")


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


@mutator
class _ToBF16(PyExprMutator):
    def __init__(self, mod, func, keep_f32: dict):
        super().__init__(mod)
        self.weights = WeightPacker(self, func)
        self.keep_f32 = keep_f32

    def visit_call_(self, call):
        keep = is_among(self.keep_f32, call)
        call = super().visit_call_(call)
        if keep:
            return call
        kernel = KernelCall.read(call)
        if kernel is None or kernel.name not in BF16_KERNELS:
            return call
        groups = kernel.args.get("groups", 1)  # matmul has none
        found = self.weights.weight_type(kernel["w"])
        if found is None or groups != 1 or found[1] != "float32":
            return call
        packed = self.weights.pack(kernel["w"], "kokoro_tvm_ext.pack_bf16", kernel.name, groups)
        # The bf16 convolutions take the kernel size too.
        size = {} if kernel.name == "matmul" else {"kernel_size": found[0][-1]}
        return kernel.to(f"{kernel.name}_bf16", w=packed, **size)


@tvm.transform.module_pass(opt_level=0, name="PackWeightsBF16")
class PackWeightsBF16:
    """The f32 kernel calls with constant weights move to the bf16 kernels (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _pack(mod, func))


def _pack(mod, func):
    if func.attrs is not None and str(func.attrs.get(PRECISION_ATTR, "bf16")) == "fp32":
        return None
    return _ToBF16(mod, func, upstream_of_cumsum(func)).visit_expr(func)
