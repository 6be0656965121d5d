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
//! This file is bf16's steps in the tile driver (`conv/driver.rs`): conv1d
//! rounds each tile's input window to bf16 pairs once (two channels at a time;
//! the weights are tap-major, so every tap is an offset along it), or with a
//! stride its im2col rows, and multiplies the packed weights by it;
//! conv1d_transpose packs `x^T` per tile and multiplies it by its job's panels
//! of packed weights.
use tvm_ffi::Function;

use super::driver::{packed_function, ConvPrecision, ConvTile, TransposeTile};
use super::{Tuning, WeightKind};
#[cfg(target_arch = "x86_64")]
use crate::gemm::amx::x86::Hardware;
#[cfg(target_arch = "x86_64")]
use crate::gemm::bf16::gemm_walk_tiles;
use crate::gemm::bf16::{
    as_u32, gemm_bf16_shared, isa, pack_pair, pairs, Bf16Gemm, PackedA, PackedB, MR, NR,
};
#[cfg(target_arch = "x86_64")]
use crate::gemm::int8::Walk;
use crate::gemm::SharedMut;
use crate::interface::{self, Interface};
#[cfg(target_arch = "x86_64")]
use crate::isa::Isa;
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

    /// A packed tile holds a pair per column and pair of channels per tap, so
    /// it is as wide as an f32 tile of half the rows.
    fn conv_depth(cin_g: usize, k: usize) -> usize {
        k * pairs(cin_g)
    }

    /// The weights are tap-major (`gemm/bf16/weights.rs`: a pair holds two
    /// channels of one tap). With stride 1 the tile's input window is rounded
    /// to bf16 once, one row of pairs per two channels; AMX reads each tap at
    /// its offset `tap * dilation` along those rows, the other loops get the
    /// panels copied out of them (a copy, not a rounding, per tap). Otherwise
    /// each tap's im2col rows are rounded and packed in turn.
    unsafe fn conv_tile(
        w: &[u32],
        t: &ConvTile,
        scratch: &mut Scratch,
        out: SharedMut,
        parallel: bool,
    ) -> std::result::Result<(), JobError> {
        let (cfg, k, tn, cin_g) = (t.cfg, t.cfg.kernel, t.tn, t.cin_g);
        let (cp, isa) = (pairs(cin_g), isa());
        let kp = k * cp;
        let a_len = PackedA::len(t.cout_g, 2 * kp);
        let a = PackedA {
            data: &w[t.group * a_len..][..a_len],
            rows: t.cout_g,
            k: 2 * kp,
        };
        let windowed = cfg.stride == 1;
        #[cfg(target_arch = "x86_64")]
        let tiles_read_window = windowed && isa == Isa::AmxBf16;
        #[cfg(not(target_arch = "x86_64"))]
        let tiles_read_window = false;
        // A window row: every panel's NR columns at every tap's offset.
        let row_len = if windowed {
            (tn.next_multiple_of(NR) + (k - 1) * cfg.dilation).next_multiple_of(NR)
        } else {
            tn
        };
        let window_len = if windowed { cp * row_len } else { 0 };
        let b_len = if tiles_read_window {
            0
        } else {
            PackedB::len(2 * kp, tn)
        };
        scratch.set_len(window_len + b_len + 2 * row_len);
        let (window, rest) = scratch.split_at_mut(window_len);
        let (packed, rows) = rest.split_at_mut(b_len);
        let (window, packed) = (as_u32(window), as_u32(packed));
        let (lo, hi) = rows.split_at_mut(row_len);
        let pack_timer = crate::counters::phase(crate::counters::Phase::Bf16Pack);
        if windowed {
            let (valid, at) = t.window(tn + (k - 1) * cfg.dilation);
            for (q, dst) in window.chunks_exact_mut(row_len).enumerate() {
                let has_hi = 2 * q + 1 < cin_g;
                for (c, row) in [(2 * q, &mut *lo), (2 * q + 1, &mut *hi)] {
                    row.fill(0.0);
                    if c < cin_g && !valid.is_empty() {
                        row[valid.clone()].copy_from_slice(&t.x_row(c)[at..at + valid.len()]);
                    }
                }
                pack_pair(lo, has_hi.then_some(&*hi), 0, 1, NR, dst)?;
            }
            if !tiles_read_window {
                // Pair (tap, q) of panel p: window row q from column p * NR + tap * dilation.
                for (p, panel) in packed.chunks_exact_mut(kp * NR).enumerate() {
                    for (pair, dst) in panel.chunks_exact_mut(NR).enumerate() {
                        let (tap, q) = (pair / cp, pair % cp);
                        let from = q * row_len + p * NR + tap * cfg.dilation;
                        dst.copy_from_slice(&window[from..from + NR]);
                    }
                }
            }
        } else {
            for pair in 0..kp {
                let (tap, q) = (pair / cp, pair % cp);
                t.im2col_row(2 * q * k + tap, lo);
                let has_hi = 2 * q + 1 < cin_g;
                if has_hi {
                    t.im2col_row((2 * q + 1) * k + tap, hi);
                }
                pack_pair(lo, has_hi.then_some(&*hi), pair, kp, NR, packed)?;
            }
        }
        drop(pack_timer);
        let accumulate = t.bias.is_some();
        #[cfg(target_arch = "x86_64")]
        if tiles_read_window {
            let walk = Walk {
                panel_step: NR,
                taps: k,
                per_tap: cp,
                tap_step: cfg.dilation,
                quad_step: row_len,
            };
            return gemm_walk_tiles::<Hardware>(
                a,
                window,
                tn,
                walk,
                out,
                t.row0,
                t.lout,
                accumulate,
                parallel,
                Some(t.relayed),
            );
        }
        let bt = PackedB {
            data: packed,
            cols: tn,
            k: 2 * kp,
        };
        gemm_bf16_shared(
            a,
            bt,
            out,
            t.row0,
            t.lout,
            accumulate,
            parallel,
            isa,
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
