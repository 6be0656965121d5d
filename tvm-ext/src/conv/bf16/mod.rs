//! The `precision="bf16"` convolutions: conv1d and conv1d_transpose with
//! weights packed to bf16 once, at compile time (by `kokoro_tvm_ext.pack_bf16`,
//! see [`crate::gemm::bf16`]), and inputs rounded to bf16 per call; products
//! accumulate in f32 (the bf16 GEMM). Same semantics and argument checks as
//! the f32 kernels (whose parsing they share), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.conv1d_bf16(stride, pad_left, pad_right, dilation, groups, has_bias,
//!                            kernel_size, x, w_packed, [bias], OUT out)
//! kokoro_tvm_ext.conv1d_transpose_bf16(stride, pad_left, pad_right, output_padding, dilation,
//!                            groups, has_bias, kernel_size, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels come from out.
//! ```
//!
//! Where bf16 is not native (its row of the precision table is the portable
//! one), the weights are unpacked to f32 and the f32 kernels run.
//!
//! This file is bf16's steps in the tile driver (`conv/driver.rs`): conv1d packs
//! each im2col tile straight into bf16 pairs (two rows at a time) and
//! multiplies the packed weights by it; conv1d_transpose packs `x^T` per tile
//! and multiplies it by its job's panels of packed weights.
use tvm_ffi::Function;

use super::driver::{packed_function, ConvPrecision, ConvTile, TransposeTile};
use super::{Tuning, WeightKind};
use crate::gemm::bf16::{
    as_u32, gemm_bf16_shared, isa, pack_pair, pairs, Bf16Gemm, PackedA, PackedB, MR, NR,
};
use crate::gemm::SharedMut;
use crate::interface::{self, Interface};
use crate::job::JobError;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.conv1d_bf16`.
pub fn conv1d_function() -> Function {
    packed_function::<Bf16Gemm>(false)
}

/// The registered `kokoro_tvm_ext.conv1d_transpose_bf16`.
pub fn conv1d_transpose_function() -> Function {
    packed_function::<Bf16Gemm>(true)
}

impl ConvPrecision for Bf16Gemm {
    const CONV1D: &'static Interface = &interface::CONV1D_BF16;
    const CONV1D_TRANSPOSE: &'static Interface = &interface::CONV1D_TRANSPOSE_BF16;
    const WEIGHT_KIND: WeightKind = WeightKind::Bf16;

    /// A packed tile holds a pair per column and pair of rows, so it is as
    /// wide as an f32 tile of half the rows.
    fn conv_depth(cin_g: usize, k: usize) -> usize {
        pairs(cin_g * k)
    }

    unsafe fn conv_tile(
        w: &[u32],
        t: &ConvTile,
        scratch: &mut Scratch,
        out: SharedMut,
        parallel: bool,
    ) -> std::result::Result<(), JobError> {
        let (tn, kc) = (t.tn, t.cin_g * t.cfg.kernel);
        let kp = pairs(kc);
        let a_len = PackedA::len(t.cout_g, kc);
        let b_len = PackedB::len(kc, tn);
        scratch.set_len(b_len + 2 * tn);
        let (packed, rows) = scratch.split_at_mut(b_len);
        let packed = as_u32(packed);
        let (lo, hi) = rows.split_at_mut(tn);
        // im2col rows 2q and 2q + 1, straight into pair q of the packed tile.
        let pack_timer = crate::counters::phase(crate::counters::Phase::Bf16Pack);
        for q in 0..kp {
            t.im2col_row(2 * q, lo);
            let has_hi = 2 * q + 1 < kc;
            if has_hi {
                t.im2col_row(2 * q + 1, hi);
            }
            pack_pair(lo, has_hi.then_some(&*hi), q, kp, NR, packed)?;
        }
        drop(pack_timer);
        let a = PackedA {
            data: &w[t.group * a_len..][..a_len],
            rows: t.cout_g,
            k: kc,
        };
        let bt = PackedB {
            data: packed,
            cols: tn,
            k: kc,
        };
        let accumulate = t.bias.is_some();
        gemm_bf16_shared(
            a,
            bt,
            out,
            t.row0,
            t.lout,
            accumulate,
            parallel,
            isa(),
            Some(t.relayed),
        )
    }

    fn transpose_depth(cin_g: usize) -> usize {
        pairs(cin_g)
    }

    /// The column block `[tn, ncols]` within the budget, whole panels of rows.
    fn transpose_tile(tuning: &Tuning, _block_cols: usize, job_cols: usize, l: usize) -> usize {
        (tuning.tile_bytes / (4 * job_cols)).clamp(MR, l.max(MR)) / MR * MR
    }

    fn transpose_product<'s>(
        w: &[u32],
        t: &TransposeTile,
        scratch: &'s mut Scratch,
        parallel: bool,
    ) -> std::result::Result<&'s [f32], JobError> {
        let (cin_g, tn) = (t.cin_g, t.tn);
        let n_g = t.cout_g * t.cfg.kernel;
        let b_len = PackedB::len(cin_g, n_g);
        let whole = PackedB {
            data: &w[t.group * b_len..][..b_len],
            cols: n_g,
            k: cin_g,
        };
        let wb = whole.panels(t.c0 / NR, (t.c0 + t.ncols).div_ceil(NR))?;
        let kp = pairs(cin_g);
        let a_len = PackedA::len(tn, cin_g);
        scratch.set_len(a_len + tn * t.ncols);
        let (packed, cols) = scratch.split_at_mut(a_len);
        let packed = as_u32(packed);
        // x^T: rows are input columns t, the inner dimension channels c.
        let pack_timer = crate::counters::phase(crate::counters::Phase::Bf16Pack);
        for q in 0..kp {
            let hi = (2 * q + 1 < cin_g).then(|| t.x_row(2 * q + 1));
            pack_pair(t.x_row(2 * q), hi, q, kp, MR, packed)?;
        }
        drop(pack_timer);
        let a = PackedA {
            data: packed,
            rows: tn,
            k: cin_g,
        };
        // SAFETY: `cols` is this job's own scratch.
        unsafe {
            gemm_bf16_shared(
                a,
                wb,
                SharedMut::new(cols),
                0,
                t.ncols,
                false,
                parallel,
                isa(),
                None, // A is this tile's input
            )?
        };
        Ok(cols)
    }
}
