//! `precision="int8"` matmul: `w` quantized to int8 once, at compile time (by
//! `kokoro_tvm_ext.pack_int8`, see [`crate::gemm::int8`]), each row of `x`
//! quantized to u8 per call (its own scale and zero point); int32 sums,
//! dequantized with the bias added. Same semantics and argument checks as the
//! f32 matmul (whose parsing it shares), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.matmul_int8(has_bias, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels (N) come from out.
//! ```
//!
//! This file is int8's steps in the packed matmul (`matmul/packed.rs`). Where
//! int8 is not native, the weights are dequantized to f32 and the f32 matmul
//! runs.
use tvm_ffi::Function;

use super::packed::{packed_function, MatmulPrecision};
use super::WeightKind;
use crate::gemm::bf16::as_u32;
use crate::gemm::int8::{
    as_i32, gemm_int8, isa, min_max, quads, Affine, Int8Gemm, PackedA, PackedB, Scales, Signs,
    Weights, MR,
};
use crate::gemm::SharedMut;
use crate::interface::{self, Interface};
use crate::job::JobError;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.matmul_int8`.
pub fn matmul_function() -> Function {
    packed_function::<Int8Gemm>()
}

/// The packed rows of `x`, then a scale and a zero point per row (the last
/// panel's padding rows too), in one scratch buffer.
fn split(rows: usize, k: usize, scratch: &mut [f32]) -> (&mut [u32], &mut [f32], &mut [i32]) {
    let a_len = PackedA::len(rows, k);
    let (packed, rest) = scratch.split_at_mut(a_len);
    let (row_scale, row_off) = rest.split_at_mut(rows.next_multiple_of(MR));
    (as_u32(packed), row_scale, as_i32(row_off))
}

impl MatmulPrecision for Int8Gemm {
    const MATMUL: &'static Interface = &interface::MATMUL_INT8;
    const MATMUL_WEIGHTS: WeightKind = WeightKind::Int8;

    /// Each row its own quantization (its scale and zero point).
    fn pack_rows(
        rows: usize,
        k: usize,
        x: &[f32],
        scratch: &mut Scratch,
    ) -> std::result::Result<(), JobError> {
        let kq = quads(k);
        let padded = rows.next_multiple_of(MR);
        scratch.set_len(PackedA::len(rows, k) + 2 * padded);
        let (packed, row_scale, row_off) = split(rows, k, scratch);
        for (i, xr) in x.chunks_exact(k.max(1)).enumerate().take(rows) {
            let (lo, hi) = min_max(xr);
            let quant = Affine::new(lo, hi);
            row_scale[i] = quant.scale;
            row_off[i] = quant.zero;
            let (p, r) = (i / MR, i % MR);
            for (q, quad) in xr.chunks(4).enumerate() {
                let bytes = std::array::from_fn(|t| quad.get(t).map_or(0, |&v| quant.quantize(v)));
                packed[(p * kq + q) * MR + r] = u32::from_le_bytes(bytes);
            }
        }
        // The padding rows of the last panel: computed, never stored.
        for i in rows..padded {
            row_scale[i] = 0.0;
            row_off[i] = 0;
            for q in 0..kq {
                packed[((i / MR) * kq + q) * MR + i % MR] = 0;
            }
        }
        Ok(())
    }

    fn multiply(
        (rows, k, n): (usize, usize, usize),
        scratch: &mut Scratch,
        w: &Weights,
        out: &mut [f32],
        accumulate: bool,
    ) -> std::result::Result<(), JobError> {
        if k == 0 {
            // No products: the bias in place, or zeros.
            if !accumulate {
                out.fill(0.0);
            }
            return Ok(());
        }
        let g = w.group(0);
        let (packed, row_scale, row_off) = split(rows, k, scratch);
        let a = PackedA {
            data: packed,
            rows,
            k,
        };
        let b = PackedB {
            data: g.panels,
            cols: n,
            k,
        };
        let s = Scales {
            row_scale,
            row_off,
            col_scale: g.scale,
            col_off: g.sum,
        };
        // SAFETY: `out` is borrowed mutably for the whole call.
        unsafe {
            gemm_int8(
                a,
                b,
                Signs::WeightsB,
                s,
                SharedMut::new(out),
                0,
                n,
                accumulate,
                true,
                isa(),
            )
        }
    }
}
