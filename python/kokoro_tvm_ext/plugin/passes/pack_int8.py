"""``precision="int8"``: the plugin's conv1d / conv1d_transpose / matmul calls
with constant weights become their int8 variants, with the weights quantized to
int8 (symmetric, a scale per output channel) and packed once, here, at compile
time (``kokoro_tvm_ext.pack_int8``; the layout is the Rust side's business, see
tvm-ext/src/gemm/int8/weights.rs). The kernels quantize their inputs to u8 per
call (per tile of columns, per row for matmul) and multiply with VPDPBUSD where
the CPU has AVX512-VNNI, on aarch64 with USMMLA (i8mm) or SDOT (dotprod);
elsewhere they run the f32 kernels on the dequantized weights.

Runs after FoldConstant (weight norm folded) and before PackWeightsWinograd: on
a Cascade Lake Xeon (AVX512-VNNI) the int8 convolutions beat f32 Winograd on
every shape of Kokoro's residual blocks, 1.3-2.2x, and the f32 GEMM 2-2.8x
(``bench_int8_conv`` in tvm-ext/src/conv/int8/tests.rs), so the calls
Winograd would take go int8 too. The calls that stay f32 (grouped, upstream of
the F0 predictor's cumsum, the text stage) are those of _relax_utils.py;
Winograd still takes those of its shapes.

Calls with fewer than 32 input or output channels stay f32 too: they are the
ends of a vocoder's signal path, where 8 bits of range show, and cost little.
In Kokoro those are the noise convolutions on the sine source's STFT (22
channels: from a wide dynamic range), the post convolution to the spectrum, the
inverse STFT and the F0/N convolutions. Measured with the real weights (log-mel
L1 against our fp32 artifact, same noise, 40 tokens): every call int8 0.41;
these f32 0.038, of which 0.012 is the int8 weights alone (under PyTorch's own
noise floor, 0.043-0.048).
"""

from __future__ import annotations

import tvm

from kokoro_tvm_ext.plugin.passes._relax_utils import pack_kernels

# Calls with fewer input or output channels stay f32 (see the module doc).
MIN_CHANNELS = 32


@tvm.transform.module_pass(opt_level=0, name="PackWeightsInt8")
class PackWeightsInt8:
    """The f32 kernel calls with constant weights move to the int8 kernels (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return pack_kernels(mod, "int8", "kokoro_tvm_ext.pack_int8", "_int8", min_channels=MIN_CHANNELS)
