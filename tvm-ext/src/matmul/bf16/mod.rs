//! `precision="bf16"` matmul: `w` packed to bf16 once, at compile time (by
//! `kokoro_tvm_ext.pack_bf16`, see [`crate::gemm::bf16`]), `x` rounded to bf16
//! per call; products accumulate in f32 (the bf16 GEMM). Same semantics and
//! argument checks as the f32 matmul (whose parsing it shares), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.matmul_bf16(has_bias, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels (N) come from out.
//! ```
//!
//! Where bf16 is not native ([`crate::gemm::bf16::native_bf16`]), the weights
//! are unpacked to f32 and the f32 matmul runs. Otherwise `x` is packed once
//! and the GEMM splits the output over the threads.
use tvm_ffi::{AnyView, Function, Result};

use super::{call_data, expect_packed_call, matmul_forward, parse_call, prefill_bias, WeightKind};
use crate::args::dps_function;
use crate::gemm::bf16::{
    as_u32, gemm_bf16, native_bf16, pack_a, packed_shape, packed_weights, unpack_b_into,
    with_f32_weights, Kind, PackedA, PackedB,
};
use crate::interface;
use crate::job::internal;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.matmul_bf16`.
pub fn matmul_function() -> Function {
    dps_function(matmul_packed)
}

fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul_bf16";
    let c = parse_call(&interface::MATMUL_BF16, args, WeightKind::Bf16)?;
    let w = packed_weights(WHO, &c.w, &packed_shape(Kind::Matmul, 1, &[c.k, c.n]))?;
    let (x, bias, out) = call_data(WHO, &c)?;
    matmul_bf16_forward(c.rows, c.k, c.n, &x, &w, bias.as_deref(), out)
}

/// `out [rows, n] = x [rows, k] @ w + bias` with `w` packed (as `u32` pairs);
/// the f32 kernel on the unpacked weights where bf16 is not native.
pub fn matmul_bf16_forward(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "matmul_bf16";
    let w_fits = w.len() == PackedB::len(k, n);
    expect_packed_call(WHO, (rows, k, n), x, w_fits, bias, out)?;
    if !native_bf16() {
        let unpack = |f32_w: &mut [f32]| unpack_b_into(w, k, n, f32_w);
        return with_f32_weights(k * n, unpack, |f32_w| {
            matmul_forward(rows, k, n, x, f32_w, bias, out)
        });
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let mut a = Scratch::new();
    a.set_len(PackedA::len(rows, k));
    let packed = as_u32(&mut a);
    pack_a(rows, k, |i, l| x[i * k + l], packed).map_err(|e| internal(WHO, e))?;
    prefill_bias(out, n, bias);
    let (a, b) = (
        PackedA {
            data: packed,
            rows,
            k,
        },
        PackedB {
            data: w,
            cols: n,
            k,
        },
    );
    gemm_bf16(a, b, out, 0, n, bias.is_some(), true).map_err(|e| internal(WHO, e))
}
