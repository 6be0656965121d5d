"""Every precision: the plugin's f32 matmul calls with constant weights become
``kokoro_tvm_ext.matmul_panels``, their weights packed once, at compile time (or when a
checkpoint is bound), by ``kokoro_tvm_ext.pack_f32`` into panels of 64 columns: the layout
of the ``gemm`` crate's micro-kernel, which then reads them in place (see
tvm-ext/src/gemm/panels/).

The f32 matmul hands the crate ``[K, N]`` weights, which it packs again on every call: in
ALBERT's linear layers (a few dozen to 500 rows against 768 x 768 and 768 x 2048 weights)
that copy cost about as much as the products. Same f32 arithmetic, nothing rounded, so the
calls upstream of the F0 predictor's cumsum and the text stage (kept f32 by the other
precisions) are packed too.

Runs last among the packing passes: the matmuls bf16 and int8 take are theirs.
"""

from __future__ import annotations

import tvm

from kokoro_tvm_ext.plugin.passes._relax_utils import pack_kernels


@tvm.transform.module_pass(opt_level=0, name="PackWeightsF32")
class PackWeightsF32:
    """The f32 matmul calls with constant weights move to the panel kernel (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return pack_kernels(mod, "fp32", "kokoro_tvm_ext.pack_f32", "_panels", kernels=("matmul",))
