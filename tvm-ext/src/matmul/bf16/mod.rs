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
//! This file is bf16's steps in the packed matmul (`matmul/packed.rs`): `x`
//! is packed once and the GEMM splits the output over the threads. Where bf16
//! is not native, the weights are unpacked to f32 and the f32 matmul runs.
use tvm_ffi::Function;

use super::packed::{packed_function, MatmulPrecision};
use super::WeightKind;
use crate::gemm::bf16::{as_u32, gemm_bf16, pack_a, Bf16Gemm, PackedA, PackedB};
use crate::interface::{self, Interface};
use crate::job::JobError;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.matmul_bf16`.
pub fn matmul_function() -> Function {
    packed_function::<Bf16Gemm>()
}

impl MatmulPrecision for Bf16Gemm {
    const MATMUL: &'static Interface = &interface::MATMUL_BF16;
    const MATMUL_WEIGHTS: WeightKind = WeightKind::Bf16;

    fn pack_rows(
        rows: usize,
        k: usize,
        x: &[f32],
        scratch: &mut Scratch,
    ) -> std::result::Result<(), JobError> {
        scratch.set_len(PackedA::len(rows, k));
        pack_a(rows, k, |i, l| x[i * k + l], as_u32(scratch))
    }

    fn multiply(
        (rows, k, n): (usize, usize, usize),
        scratch: &mut Scratch,
        w: &[u32],
        out: &mut [f32],
        accumulate: bool,
    ) -> std::result::Result<(), JobError> {
        let a = PackedA {
            data: as_u32(scratch),
            rows,
            k,
        };
        let b = PackedB {
            data: w,
            cols: n,
            k,
        };
        gemm_bf16(a, b, out, 0, n, accumulate, true)
    }
}
