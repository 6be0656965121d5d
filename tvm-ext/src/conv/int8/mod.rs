//! The `precision="int8"` convolutions: conv1d and conv1d_transpose with
//! weights quantized to int8 once, at compile time (by `kokoro_tvm_ext.pack_int8`,
//! see [`crate::gemm::int8`]), and inputs quantized to u8 per tile (one scale and
//! zero point per tile of columns, from the input window the tile reads);
//! int32 sums, dequantized with the bias added. Same semantics and argument
//! checks as the f32 kernels (whose parsing they share), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.conv1d_int8(stride, pad_left, pad_right, dilation, groups, has_bias,
//!                            kernel_size, x, w_packed, [bias], OUT out)
//! kokoro_tvm_ext.conv1d_transpose_int8(stride, pad_left, pad_right, output_padding, dilation,
//!                            groups, has_bias, kernel_size, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels come from out.
//! ```
//!
//! Where int8 is not native (its row of the precision table is the portable
//! one), the weights are dequantized to f32 and the f32 kernels run.
//!
//! This file is int8's steps in the tile driver (`conv/driver.rs`): conv1d quantizes the input window of each tile of output
//! columns once and packs it as one row of quads per four input channels; its
//! weights are packed tap-major (a quad holds four channels of one tap), so
//! with stride 1 every tap reads that one row at its offset `tap * dilation`
//! ([`crate::gemm::int8::Walk`]) instead of an im2col tile `K` times the size
//! (1.3-1.8x faster calls at Kokoro's residual-block shapes). The bias is
//! added in the tile's epilogue. conv1d_transpose, as the bf16 kernel, packs
//! `x^T` per tile, multiplies it by its job's panels of weights, then scatters
//! (col2im).
use tvm_ffi::Function;

use super::driver::{packed_function, ConvPrecision, ConvTile, TransposeTile};
use super::{Tuning, WeightKind};
use crate::gemm::bf16::as_u32;
use crate::gemm::int8::{
    as_i32, as_u8, fill_affine, gemm_int8, gemm_int8_windowed, interleave_quad, isa, min_max,
    pack_quad, quads, quantize_row, Affine, Int8Gemm, PackedA, PackedB, Scales, Signs, Walk,
    Weights, MR, NR,
};
use crate::gemm::SharedMut;
use crate::interface::{self, Interface};
use crate::job::JobError;
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.conv1d_int8`.
pub fn conv1d_function() -> Function {
    packed_function::<Int8Gemm>(false)
}

/// The registered `kokoro_tvm_ext.conv1d_transpose_int8`.
pub fn conv1d_transpose_function() -> Function {
    packed_function::<Int8Gemm>(true)
}

/// The quantization of the inputs `rows` read at `lo..hi` (clipped to each row).
fn window_affine<'a>(rows: impl Iterator<Item = &'a [f32]>, lo: usize, hi: usize) -> Affine {
    let (mut a, mut b) = (0.0f32, 0.0f32);
    for r in rows {
        let (x, y) = min_max(&r[lo.min(r.len())..hi.min(r.len())]);
        a = a.min(x);
        b = b.max(y);
    }
    Affine::new(a, b)
}

impl ConvPrecision for Int8Gemm {
    const CONV1D: &'static Interface = &interface::CONV1D_INT8;
    const CONV1D_TRANSPOSE: &'static Interface = &interface::CONV1D_TRANSPOSE_INT8;
    const WEIGHT_KIND: WeightKind = WeightKind::Int8;
    const BIAS_IN_EPILOGUE: bool = true;

    /// One row of quads per four input channels and tap.
    fn conv_depth(cin_g: usize, k: usize) -> usize {
        quads(cin_g) * k
    }

    /// Tiles as in the f32 kernel, rounded to whole panels of [`NR`] columns. A
    /// tile's input window is quantized once (one scale and zero point) and packed
    /// as one row of quads per four input channels, the weights' order
    /// (`weights.rs`: tap-major, a quad holds four channels of one tap). With
    /// stride 1 every tap reads that row at its offset `tap * dilation`; otherwise
    /// each tap's im2col rows are packed one after the other.
    unsafe fn conv_tile(
        w: &Weights,
        t: &ConvTile,
        scratch: &mut Scratch,
        out: SharedMut,
        parallel: bool,
    ) -> std::result::Result<(), JobError> {
        let (cfg, k, tn, t0, cin_g) = (t.cfg, t.cfg.kernel, t.tn, t.t0, t.cin_g);
        let cq = quads(cin_g);
        // The last panel reads NR columns: the rows are that long (and the
        // columns past `tn` are never stored).
        let cols = tn.next_multiple_of(NR);
        let window = cfg.stride == 1;
        let row_len = if window {
            cols + (k - 1) * cfg.dilation
        } else {
            cols
        };
        // Stride 1: a tap is an offset along the one packed window; else the
        // next tap's rows follow the previous tap's.
        let walk = Walk {
            panel_step: NR,
            taps: k,
            per_tap: cq,
            tap_step: if window { cfg.dilation } else { cq * row_len },
            quad_step: row_len,
        };
        let packed_rows = if window { cq } else { cq * k };
        let b_len = packed_rows * row_len;
        let im2col_len = if window { 0 } else { tn };
        scratch.set_len(b_len + cq * row_len + im2col_len + 2 * tn);
        let (packed, rest) = scratch.split_at_mut(b_len);
        let packed = as_u32(packed);
        let (quantized, rest) = rest.split_at_mut(cq * row_len);
        let quantized = as_u8(quantized);
        let (im2col, rest) = rest.split_at_mut(im2col_len);
        let (col_scale, col_off) = rest.split_at_mut(tn);
        let col_off = as_i32(col_off);
        // The inputs the tile reads: from its first column's first tap to its
        // last column's last tap.
        let first = (t0 * cfg.stride).saturating_sub(cfg.pad_left);
        let last =
            ((t0 + tn - 1) * cfg.stride + (k - 1) * cfg.dilation + 1).saturating_sub(cfg.pad_left);
        let pack_timer = crate::counters::phase(crate::counters::Phase::QuantizePack);
        let quant = window_affine((0..cin_g).map(|c| t.x_row(c)), first, last);
        fill_affine(quant, tn, col_scale, col_off);
        // What the padding (0.0) quantizes to.
        let zero = quant.zero as u8;
        let (valid, at) = t.window(tn + (k - 1) * cfg.dilation);
        for tap in 0..if window { 1 } else { k } {
            // One quantized row of bytes per channel (the padding channels' zero).
            for (c, dst) in quantized.chunks_exact_mut(row_len).enumerate() {
                if c >= cin_g {
                    dst.fill(0);
                } else if window {
                    dst.fill(zero);
                    if !valid.is_empty() {
                        let src = &t.x_row(c)[at..at + valid.len()];
                        quantize_row(src, quant, &mut dst[valid.clone()]);
                    }
                } else {
                    t.im2col_row(c * k + tap, im2col);
                    quantize_row(im2col, quant, &mut dst[..tn]);
                    dst[tn..].fill(zero);
                }
            }
            let rows = packed[tap * cq * row_len..][..cq * row_len].chunks_exact_mut(row_len);
            for (qi, dst) in rows.enumerate() {
                let quad = std::array::from_fn(|t| &quantized[(4 * qi + t) * row_len..][..row_len]);
                interleave_quad(quad, dst);
            }
        }
        drop(pack_timer);
        let wg = w.group(t.group);
        let a = PackedA {
            data: wg.panels,
            rows: t.cout_g,
            k: 4 * cq * k,
        };
        let s = Scales {
            row_scale: wg.scale,
            row_off: wg.sum,
            col_scale,
            col_off,
        };
        gemm_int8_windowed(
            a,
            packed,
            tn,
            walk,
            s,
            out,
            t.row0,
            t.lout,
            t.bias,
            parallel,
            isa(),
            Some(t.relayed),
        )
    }

    /// A weight byte is a quarter of an f32: `kq` quads take the place of
    /// `kq` f32 rows.
    fn transpose_depth(cin_g: usize) -> usize {
        quads(cin_g)
    }

    /// The column block `[tn, ncols]` within the budget, whole panels of rows.
    fn transpose_tile(tuning: &Tuning, _block_cols: usize, job_cols: usize, l: usize) -> usize {
        (tuning.tile_bytes / (4 * job_cols)).clamp(MR, l.max(MR)) / MR * MR
    }

    /// `x^T` quantized (one scale per tile), packed and multiplied by the
    /// job's panels of weights.
    fn transpose_product<'s>(
        w: &Weights,
        t: &TransposeTile,
        scratch: &'s mut Scratch,
        parallel: bool,
    ) -> std::result::Result<&'s [f32], JobError> {
        let (cin_g, tn) = (t.cin_g, t.tn);
        let kq = quads(cin_g);
        let wg = w.group(t.group);
        let whole = PackedB {
            data: wg.panels,
            cols: t.cout_g * t.cfg.kernel,
            k: cin_g,
        };
        let wb = whole.panels(t.c0 / NR, (t.c0 + t.ncols).div_ceil(NR))?;
        let a_len = PackedA::len(tn, cin_g);
        let padded = tn.next_multiple_of(MR);
        scratch.set_len(a_len + tn * t.ncols + 2 * padded);
        let (packed, rest) = scratch.split_at_mut(a_len);
        let (cols, rest) = rest.split_at_mut(tn * t.ncols);
        let (row_scale, row_off) = rest.split_at_mut(padded);
        let (packed, row_off) = (as_u32(packed), as_i32(row_off));
        let pack_timer = crate::counters::phase(crate::counters::Phase::QuantizePack);
        let quant = window_affine((0..cin_g).map(|c| t.x_row(c)), 0, tn);
        fill_affine(quant, padded, row_scale, row_off);
        // x^T: rows are input columns t, the inner dimension channels c.
        for q in 0..kq {
            let quad = std::array::from_fn(|r| (4 * q + r < cin_g).then(|| t.x_row(4 * q + r)));
            pack_quad(quad, tn, quant, q, kq, MR, packed)?;
        }
        drop(pack_timer);
        let a = PackedA {
            data: packed,
            rows: tn,
            k: cin_g,
        };
        let s = Scales {
            row_scale,
            row_off,
            col_scale: &wg.scale[t.c0..],
            col_off: &wg.sum[t.c0..],
        };
        // SAFETY: `cols` is this job's own scratch.
        unsafe {
            gemm_int8(
                a,
                wb,
                Signs::WeightsB,
                s,
                SharedMut::new(cols),
                0,
                t.ncols,
                false,
                parallel,
                isa(),
            )?
        };
        Ok(cols)
    }
}
