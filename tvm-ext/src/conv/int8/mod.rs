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
//! Where int8 is not native ([`crate::gemm::int8::native_int8`]), the weights
//! are dequantized to f32 and the f32 kernels run.
//!
//! How they run: conv1d quantizes the input window of each tile of output
//! columns once and packs it as one row of quads per four input channels; its
//! weights are packed tap-major (a quad holds four channels of one tap), so
//! with stride 1 every tap reads that one row at its offset `tap * dilation`
//! ([`crate::gemm::int8::Walk`]) instead of an im2col tile `K` times the size
//! (1.3-1.8x faster calls at Kokoro's residual-block shapes). The bias is
//! added in the tile's epilogue. conv1d_transpose, as the bf16 kernel, packs
//! `x^T` per tile, multiplies it by its job's panels of weights, then scatters
//! (col2im).
use tvm_ffi::{AnyView, Function, Result};

use super::packed::{self, gcd, weight_shape};
use super::{
    call_data, col2im, im2col_row, parse_call, run_jobs, run_parallel, Blocks, Conv1dConfig,
    ConvCall, Plan, Tuning, WeightKind, TUNING,
};
use crate::gemm::bf16::as_u32;
use crate::gemm::int8::{
    as_i32, as_u8, fill_affine, gemm_int8, gemm_int8_windowed, interleave_quad, isa, min_max,
    native_int8, pack_quad, packed_weights, quads, quantize_row, with_f32_weights, Affine, PackedA,
    PackedB, Scales, Signs, Walk, Weights, MR, NR,
};
use crate::gemm::SharedMut;
use crate::interface;
use crate::job::{internal, JobError};
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.conv1d_int8`.
pub fn conv1d_function() -> Function {
    packed::function(conv_packed, false)
}

/// The registered `kokoro_tvm_ext.conv1d_transpose_int8`.
pub fn conv1d_transpose_function() -> Function {
    packed::function(conv_packed, true)
}

fn conv_packed(args: &[AnyView], transpose: bool) -> Result<()> {
    let iface = if transpose {
        &interface::CONV1D_TRANSPOSE_INT8
    } else {
        &interface::CONV1D_INT8
    };
    let who = iface.name;
    let call: ConvCall = parse_call(iface, args, transpose, WeightKind::Int8)?;
    let cfg = &call.cfg;
    let (kind, w_shape) = weight_shape(cfg, transpose);
    let w = packed_weights(who, &call.t.w, kind, cfg.groups, &w_shape)?;
    let (x, bias, out) = call_data(who, &call)?;
    conv_int8_forward(cfg, transpose, &x, &w, bias.as_deref(), out)
}

/// conv1d (or with `transpose`, conv1d_transpose) on dense buffers with
/// weights packed by `pack_int8`; the f32 kernels on the dequantized weights
/// where int8 is not native.
pub(crate) fn conv_int8_forward(
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let who = if transpose {
        "conv1d_transpose_int8"
    } else {
        "conv1d_int8"
    };
    let lout = packed::checked_out_len(who, cfg, transpose, x, true, bias, out)?;
    if !native_int8() {
        let (kind, w_shape) = weight_shape(cfg, transpose);
        return with_f32_weights(kind, cfg.groups, &w_shape, w, |f32_w| {
            packed::f32_forward(cfg, transpose, x, f32_w, bias, out)
        });
    }
    let r = if transpose {
        transpose_int8(cfg, lout, x, w, bias, out, TUNING)
    } else {
        conv_int8(cfg, lout, x, w, bias, out, TUNING.tile_bytes)
    };
    r.map_err(|e| internal(who, e))
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

/// Tiles as in the f32 kernel, rounded to whole panels of [`NR`] columns. A
/// tile's input window is quantized once (one scale and zero point) and packed
/// as one row of quads per four input channels, the weights' order
/// (`weights.rs`: tap-major, a quad holds four channels of one tap). With
/// stride 1 every tap reads that row at its offset `tap * dilation`; otherwise
/// each tap's im2col rows are packed one after the other.
fn conv_int8(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let cq = quads(cin_g);
    let units = cfg.batch * g;
    let plan = Plan::new(units, lout, cq * k, tile_bytes).in_panels(NR, units, lout);
    let out = SharedMut::new(out);
    run_jobs(units, &plan, |i, scratch, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (b, gi) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
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
        let x_row = |c: usize| &x[(b * cin + gi * cin_g + c) * l..][..l];
        // The inputs the tile reads: from its first column's first tap to its
        // last column's last tap.
        let first = (t0 * cfg.stride).saturating_sub(cfg.pad_left);
        let last =
            ((t0 + tn - 1) * cfg.stride + (k - 1) * cfg.dilation + 1).saturating_sub(cfg.pad_left);
        let quant = window_affine((0..cin_g).map(x_row), first, last);
        fill_affine(quant, tn, col_scale, col_off);
        // What the padding (0.0) quantizes to.
        let zero = quant.zero as u8;
        // Row position p of the window is input column t0 + p - pad_left.
        let start = t0 as isize - cfg.pad_left as isize;
        let span = tn + (k - 1) * cfg.dilation;
        let valid = (-start).clamp(0, span as isize) as usize
            ..(l as isize - start).clamp(0, span as isize) as usize;
        for tap in 0..if window { 1 } else { k } {
            // One quantized row of bytes per channel (the padding channels' zero).
            for (c, dst) in quantized.chunks_exact_mut(row_len).enumerate() {
                if c >= cin_g {
                    dst.fill(0);
                } else if window {
                    dst.fill(zero);
                    if valid.start < valid.end {
                        let at = (start + valid.start as isize) as usize;
                        let src = &x_row(c)[at..at + valid.len()];
                        quantize_row(src, quant, &mut dst[valid.clone()]);
                    }
                } else {
                    im2col_row(cfg, x_row(c), tap, t0, im2col);
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
        let row0 = (b * cout + gi * cout_g) * lout + t0;
        let wg = w.group(gi);
        let a = PackedA {
            data: wg.panels,
            rows: cout_g,
            k: 4 * cq * k,
        };
        let s = Scales {
            row_scale: wg.scale,
            row_off: wg.sum,
            col_scale,
            col_off,
        };
        // SAFETY: this job alone owns columns t0..t0+tn of its rows of `out`.
        unsafe {
            gemm_int8_windowed(
                a,
                packed,
                tn,
                walk,
                s,
                out,
                row0,
                lout,
                bias.map(|bv| &bv[gi * cout_g..][..cout_g]),
                parallel,
                isa(),
            )
        }
    })
}

// ---------------------------------------------------------------------------
// conv1d_transpose.
// ---------------------------------------------------------------------------

/// Per job a block of output channels, as in the bf16 kernel; its weights are
/// the panels of packed columns `(o, tap)` that cover the block. Per tile of
/// input columns, `x^T` is quantized (one scale per tile), packed and multiplied
/// by those panels, then scattered (col2im).
fn transpose_int8(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let n_g = cout_g * k;
    let kq = quads(cin_g);
    let units = cfg.batch * g;
    // Blocks of whole panels: ob * k a multiple of NR (a weight byte is a
    // quarter of an f32: `kq` quads take the place of `kq` f32 rows).
    let blocks = Blocks::new(units, cout_g, k, kq, tuning.weight_bytes, NR / gcd(k, NR));
    let ob = blocks.size;
    let out = SharedMut::new(out);
    let job =
        |i: usize, scratch: &mut Scratch, parallel: bool| -> std::result::Result<(), JobError> {
            let (unit, bi) = (i / blocks.count, i % blocks.count);
            let (b, gi) = (unit / g, unit % g);
            let o0 = bi * ob;
            let on = ob.min(cout_g - o0);
            let (p0, p1) = (o0 * k / NR, ((o0 + on) * k).div_ceil(NR));
            let wg = w.group(gi);
            let whole = PackedB {
                data: wg.panels,
                cols: n_g,
                k: cin_g,
            };
            let wb = whole.panels(p0, p1)?;
            let (ncols, off) = (wb.cols, o0 * k - p0 * NR);
            let row0 = (b * cout + gi * cout_g + o0) * lout;
            // SAFETY: this job alone owns these `on` rows of `out`.
            let rows = unsafe { out.slice(row0, on * lout)? };
            for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
                row.fill(bias.map_or(0.0, |bv| bv[gi * cout_g + o0 + ol]));
            }
            let tile = (tuning.tile_bytes / (4 * ncols)).clamp(MR, l.max(MR)) / MR * MR;
            let x_row =
                |c: usize, t0: usize, tn: usize| &x[(b * cin + gi * cin_g + c) * l + t0..][..tn];
            for t0 in (0..l).step_by(tile) {
                let tn = tile.min(l - t0);
                let a_len = PackedA::len(tn, cin_g);
                let padded = tn.next_multiple_of(MR);
                scratch.set_len(a_len + tn * ncols + 2 * padded);
                let (packed, rest) = scratch.split_at_mut(a_len);
                let (cols, rest) = rest.split_at_mut(tn * ncols);
                let (row_scale, row_off) = rest.split_at_mut(padded);
                let (packed, row_off) = (as_u32(packed), as_i32(row_off));
                let quant = window_affine((0..cin_g).map(|c| x_row(c, t0, tn)), 0, tn);
                fill_affine(quant, padded, row_scale, row_off);
                // x^T: rows are input columns t, the inner dimension channels c.
                for q in 0..kq {
                    let quad = std::array::from_fn(|t| {
                        (4 * q + t < cin_g).then(|| x_row(4 * q + t, t0, tn))
                    });
                    pack_quad(quad, tn, quant, q, kq, MR, packed)?;
                }
                let a = PackedA {
                    data: packed,
                    rows: tn,
                    k: cin_g,
                };
                let s = Scales {
                    row_scale,
                    row_off,
                    col_scale: &wg.scale[p0 * NR..],
                    col_off: &wg.sum[p0 * NR..],
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
                        ncols,
                        false,
                        parallel,
                        isa(),
                    )?
                };
                col2im(cfg, lout, t0, tn, cols, ncols, off, rows);
            }
            Ok(())
        };
    run_parallel(blocks.jobs, blocks.job_parallel, job)
}
