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
//! Where bf16 is not native ([`crate::gemm::bf16::native_bf16`]), the weights
//! are unpacked to f32 and the f32 kernels run.
//!
//! How they run: conv1d packs each im2col tile straight into bf16 pairs (two
//! rows at a time) and multiplies the packed weights by it, the tiles split
//! over the threads as in the f32 kernel. conv1d_transpose packs `x^T` per tile
//! and multiplies it by its job's panels of packed weights, then scatters (col2im).
use tvm_ffi::{AnyView, Function, Result};

use super::packed::{self, gcd, weight_shape};
use super::{
    call_data, col2im, fill_bias, im2col_row, parse_call, run_jobs, run_parallel, Blocks,
    Conv1dConfig, ConvCall, Plan, Tuning, WeightKind, TUNING,
};
use crate::gemm::bf16::{
    as_u32, gemm_bf16_shared, isa, native_bf16, pack_pair, packed_shape, packed_weights, pairs,
    unpack_a_into, unpack_b_into, with_f32_weights, PackedA, PackedB, MR, NR,
};
use crate::gemm::SharedMut;
use crate::interface;
use crate::job::{internal, JobError};
use crate::scratch::Scratch;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.conv1d_bf16`.
pub fn conv1d_function() -> Function {
    packed::function(conv_packed, false)
}

/// The registered `kokoro_tvm_ext.conv1d_transpose_bf16`.
pub fn conv1d_transpose_function() -> Function {
    packed::function(conv_packed, true)
}

fn conv_packed(args: &[AnyView], transpose: bool) -> Result<()> {
    let iface = if transpose {
        &interface::CONV1D_TRANSPOSE_BF16
    } else {
        &interface::CONV1D_BF16
    };
    let who = iface.name;
    let call: ConvCall = parse_call(iface, args, transpose, WeightKind::Bf16)?;
    let cfg = &call.cfg;
    let (kind, w_shape) = weight_shape(cfg, transpose);
    let w = packed_weights(who, &call.t.w, &packed_shape(kind, cfg.groups, &w_shape))?;
    let (x, bias, out) = call_data(who, &call)?;
    conv_bf16_forward(cfg, transpose, &x, &w, bias.as_deref(), out)
}

/// conv1d (or with `transpose`, conv1d_transpose) on dense buffers with packed
/// weights `w` (as `u32` pairs); the f32 kernels on the unpacked weights where
/// bf16 is not native.
pub fn conv_bf16_forward(
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let who = if transpose {
        "conv1d_transpose_bf16"
    } else {
        "conv1d_bf16"
    };
    let (g, k) = (cfg.groups, cfg.kernel);
    let (cin_g, cout_g) = (cfg.in_channels / g, cfg.out_channels / g);
    let per_group = if transpose {
        PackedB::len(cin_g, cout_g * k)
    } else {
        PackedA::len(cout_g, cin_g * k)
    };
    let w_fits = w.len() == g * per_group;
    let lout = packed::checked_out_len(who, cfg, transpose, x, w_fits, bias, out)?;
    if !native_bf16() {
        let group_len = cin_g * cout_g * k;
        let unpack = |f32_w: &mut [f32]| {
            for (p, dst) in w
                .chunks_exact(per_group.max(1))
                .zip(f32_w.chunks_exact_mut(group_len.max(1)))
            {
                if transpose {
                    unpack_b_into(p, cin_g, cout_g * k, dst)
                } else {
                    unpack_a_into(p, cout_g, cin_g * k, dst)
                }
            }
        };
        return with_f32_weights(g * group_len, unpack, |f32_w| {
            packed::f32_forward(cfg, transpose, x, f32_w, bias, out)
        });
    }
    let r = if transpose {
        transpose_bf16(cfg, lout, x, w, bias, out, TUNING)
    } else {
        conv_bf16(cfg, lout, x, w, bias, out, TUNING.tile_bytes)
    };
    r.map_err(|e| internal(who, e))
}

/// Tiles as in the f32 kernel (a packed tile holds a pair per column and pair of
/// rows, so it is as wide as an f32 tile of half the rows), rounded to whole
/// panels of [`NR`] columns.
fn conv_bf16(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[u32],
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
    let kc = cin_g * k;
    let kp = pairs(kc);
    let a_len = PackedA::len(cout_g, kc);
    let units = cfg.batch * g;
    let plan = Plan::new(units, lout, kp, tile_bytes).in_panels(NR, units, lout);
    let out = SharedMut::new(out);
    run_jobs(units, &plan, |i, scratch, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (b, gi) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
        let b_len = PackedB::len(kc, tn);
        scratch.set_len(b_len + 2 * tn);
        let (packed, rows) = scratch.split_at_mut(b_len);
        let packed = as_u32(packed);
        let (lo, hi) = rows.split_at_mut(tn);
        let x_row = |r: usize| &x[(b * cin + gi * cin_g + r / k) * l..][..l];
        // im2col rows 2q and 2q + 1, straight into pair q of the packed tile.
        for q in 0..kp {
            im2col_row(cfg, x_row(2 * q), (2 * q) % k, t0, lo);
            let has_hi = 2 * q + 1 < kc;
            if has_hi {
                im2col_row(cfg, x_row(2 * q + 1), (2 * q + 1) % k, t0, hi);
            }
            pack_pair(lo, has_hi.then_some(&*hi), q, kp, NR, packed)?;
        }
        let row0 = (b * cout + gi * cout_g) * lout + t0;
        fill_bias(
            bias.map(|bv| &bv[gi * cout_g..][..cout_g]),
            out,
            row0,
            lout,
            tn,
        )?;
        let a = PackedA {
            data: &w[gi * a_len..][..a_len],
            rows: cout_g,
            k: kc,
        };
        let bt = PackedB {
            data: packed,
            cols: tn,
            k: kc,
        };
        // SAFETY: this job alone owns columns t0..t0+tn of its rows of `out`.
        unsafe { gemm_bf16_shared(a, bt, out, row0, lout, bias.is_some(), parallel, isa()) }
    })
}

// ---------------------------------------------------------------------------
// conv1d_transpose.
// ---------------------------------------------------------------------------

/// Per job a block of output channels, as in the f32 kernel; its weights are the
/// panels of packed columns `(o, tap)` that cover the block (rounded so blocks
/// start on panel edges when the kernel size allows). Per tile of input columns,
/// `x^T` is packed and multiplied by those panels, then scattered (col2im).
fn transpose_bf16(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[u32],
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
    let b_len = PackedB::len(cin_g, n_g);
    let kp = pairs(cin_g);
    let units = cfg.batch * g;
    // Blocks of whole panels: ob * k a multiple of NR.
    let blocks = Blocks::new(units, cout_g, k, kp, tuning.weight_bytes, NR / gcd(k, NR));
    let ob = blocks.size;
    let out = SharedMut::new(out);
    let job =
        |i: usize, scratch: &mut Scratch, parallel: bool| -> std::result::Result<(), JobError> {
            let (unit, bi) = (i / blocks.count, i % blocks.count);
            let (b, gi) = (unit / g, unit % g);
            let o0 = bi * ob;
            let on = ob.min(cout_g - o0);
            let (p0, p1) = (o0 * k / NR, ((o0 + on) * k).div_ceil(NR));
            let whole = PackedB {
                data: &w[gi * b_len..][..b_len],
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
            // Input columns per tile: the column block [tn, ncols] within the budget.
            let tile = (tuning.tile_bytes / (4 * ncols)).clamp(MR, l.max(MR)) / MR * MR;
            let x_row =
                |c: usize, t0: usize, tn: usize| &x[(b * cin + gi * cin_g + c) * l + t0..][..tn];
            for t0 in (0..l).step_by(tile) {
                let tn = tile.min(l - t0);
                let a_len = PackedA::len(tn, cin_g);
                scratch.set_len(a_len + tn * ncols);
                let (packed, cols) = scratch.split_at_mut(a_len);
                let packed = as_u32(packed);
                // x^T: rows are input columns t, the inner dimension channels c.
                for q in 0..kp {
                    let hi = (2 * q + 1 < cin_g).then(|| x_row(2 * q + 1, t0, tn));
                    pack_pair(x_row(2 * q, t0, tn), hi, q, kp, MR, packed)?;
                }
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
