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
//! Where int8 is not native ([`crate::gemm::int8::native_int8`]), the weights
//! are dequantized to f32 and the f32 matmul runs.
use tvm_ffi::{AnyView, Function, Result};

use super::{call_data, expect_packed_call, matmul_forward, parse_call, prefill_bias, WeightKind};
use crate::args::dps_function;
use crate::gemm::bf16::as_u32;
use crate::gemm::int8::{
    as_i32, gemm_int8, isa, min_max, native_int8, packed_weights, quads, with_f32_weights, Affine,
    Kind, PackedA, PackedB, Scales, Signs, Weights, MR,
};
use crate::gemm::SharedMut;
use crate::interface;
use crate::job::internal;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.matmul_int8`.
pub fn matmul_function() -> Function {
    dps_function(matmul_packed)
}

fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul_int8";
    let c = parse_call(&interface::MATMUL_INT8, args, WeightKind::Int8)?;
    let w = packed_weights(WHO, &c.w, Kind::Matmul, 1, &[c.k, c.n])?;
    let (x, bias, out) = call_data(WHO, &c)?;
    matmul_int8_forward(c.rows, c.k, c.n, &x, &w, bias.as_deref(), out)
}

/// `out [rows, n] = x [rows, k] @ w + bias` with `w` packed by `pack_int8`;
/// the f32 kernel on the dequantized weights where int8 is not native.
pub(crate) fn matmul_int8_forward(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "matmul_int8";
    expect_packed_call(WHO, (rows, k, n), x, true, bias, out)?;
    if !native_int8() {
        return with_f32_weights(Kind::Matmul, 1, &[k, n], w, |f32_w| {
            matmul_forward(rows, k, n, x, f32_w, bias, out)
        });
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for row in out.chunks_exact_mut(n) {
            match bias {
                Some(b) => row.copy_from_slice(b),
                None => row.fill(0.0),
            }
        }
        return Ok(());
    }
    let g = w.group(0);
    let kq = quads(k);
    let a_len = PackedA::len(rows, k);
    let padded = rows.next_multiple_of(MR);
    let mut scratch = Scratch::new();
    scratch.set_len(a_len + 2 * padded);
    let (packed, rest) = scratch.split_at_mut(a_len);
    let (row_scale, row_off) = rest.split_at_mut(padded);
    let (packed, row_off) = (as_u32(packed), as_i32(row_off));
    // Each row its own quantization (its scale and zero point).
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
    prefill_bias(out, n, bias);
    let (a, b) = (
        PackedA {
            data: packed,
            rows,
            k,
        },
        PackedB {
            data: g.panels,
            cols: n,
            k,
        },
    );
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
            bias.is_some(),
            true,
            isa(),
        )
    }
    .map_err(|e| internal(WHO, e))
}
