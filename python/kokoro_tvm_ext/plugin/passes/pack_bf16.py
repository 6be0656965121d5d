"""``precision="bf16"``: the plugin's conv1d / conv1d_transpose / matmul calls
with constant weights (or weights computed from the weight parameters alone,
see _relax_utils.WeightPacker) become their bf16 variants, with the weights packed to
bf16 once, here, at compile time (``kokoro_tvm_ext.pack_bf16``; the layout is
the Rust side's business, see tvm-ext/src/gemm/bf16/weights.rs).

Runs after FoldConstant, so weights computed from constants (weight norm)
are constants by then, and after PackWeightsWinograd, whose calls stay f32
(faster here, see pack_winograd.py). Which calls stay f32 besides: see
_relax_utils.py (grouped ones, weights that are not constants, calls
upstream of a cumulative sum, functions marked f32). Upstream of the cumsum is
Kokoro's F0 predictor, whose output SineGen integrates into the phase of its
sines: with bf16 F0 the waveform drifts out of phase within a second (SNR
against fp32 under 10 dB), while the decoder after it takes bf16 at ~40 dB.

The precisions a compile takes are ``plugin/choices.py``'s ``PRECISIONS`` (re-exported here), which the
artifact's meta.json accepts.
"""

from __future__ import annotations

import tvm

from kokoro_tvm_ext.plugin.choices import PRECISIONS
from kokoro_tvm_ext.plugin.passes._relax_utils import PACKED_KERNELS, PRECISION_ATTR, pack_kernels

# The f32 kernels with a bf16 variant (named ``{kernel}_bf16``, packed as kind ``{kernel}``).
BF16_KERNELS = PACKED_KERNELS

__all__ = ["BF16_KERNELS", "PRECISIONS", "PRECISION_ATTR", "PackWeightsBF16", "check_precision"]


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


@tvm.transform.module_pass(opt_level=0, name="PackWeightsBF16")
class PackWeightsBF16:
    """The f32 kernel calls with constant weights move to the bf16 kernels (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return pack_kernels(mod, "bf16", "kokoro_tvm_ext.pack_bf16", "_bf16")
