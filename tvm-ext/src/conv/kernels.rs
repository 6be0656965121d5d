//! The f32 precision's steps in the tile driver (`driver.rs`): im2col tiles
//! times torch's weights through the f32 GEMM, and direct loops for groups too
//! small for a GEMM to pay off.
use super::driver::{ConvPrecision, ConvTile, TransposeTile};
use super::*;
use crate::gemm::F32Gemm;

impl ConvPrecision for F32Gemm {
    const CONV1D: &'static Interface = &interface::CONV1D;
    const CONV1D_TRANSPOSE: &'static Interface = &interface::CONV1D_TRANSPOSE;
    const WEIGHT_KIND: WeightKind = WeightKind::Torch;

    /// The im2col block: `Cin/g * K` rows.
    fn conv_depth(cin_g: usize, k: usize) -> usize {
        cin_g * k
    }

    /// The im2col block `[Cin/g * K, T]`, times the weights, which already
    /// are the row-major `[Cout/g, Cin/g * K]` matrix it needs.
    unsafe fn conv_tile(
        w: &[f32],
        t: &ConvTile,
        col: &mut Scratch,
        out: SharedMut,
        parallel: bool,
    ) -> std::result::Result<(), JobError> {
        let kc = t.cin_g * t.cfg.kernel;
        col.set_len(kc * t.tn);
        for (r, dst) in col.chunks_exact_mut(t.tn).enumerate() {
            t.im2col_row(r, dst);
        }
        // SAFETY: as the caller's; rows of `out` do not alias (row stride lout >= tn).
        sgemm_shared(
            t.cout_g,
            t.tn,
            kc,
            w,
            Layout::row_major(t.group * t.cout_g * kc, kc),
            col,
            Layout::row_major(0, t.tn),
            out,
            Layout::row_major(t.row0, t.lout),
            t.bias.is_some(),
            parallel,
        )
    }

    /// torch's own layout: `Cin/g` rows per output channel and tap.
    fn transpose_depth(cin_g: usize) -> usize {
        cin_g
    }

    /// The column block `[T, ob*K]` within the budget.
    fn transpose_tile(tuning: &Tuning, block_cols: usize, _job_cols: usize, l: usize) -> usize {
        (tuning.tile_bytes / (4 * block_cols)).clamp(16, l.max(16))
    }

    /// One GEMM on torch's layout, no packing: the weights of the job's
    /// channels `w[c, o0..o0+on, :]` are a `[Cin/g, on*K]` block of it.
    fn transpose_product<'s>(
        w: &[f32],
        t: &TransposeTile,
        cols: &'s mut Scratch,
        parallel: bool,
    ) -> std::result::Result<&'s [f32], JobError> {
        let (l, n_g) = (t.cfg.length, t.cout_g * t.cfg.kernel);
        cols.set_len(t.tn * t.ncols);
        sgemm(
            t.tn,
            t.ncols,
            t.cin_g,
            t.x(),
            Layout {
                offset: t.x_offset(),
                rs: 1,
                cs: l,
            },
            w,
            Layout {
                offset: t.group * t.cin_g * n_g + t.c0,
                rs: n_g,
                cs: 1,
            },
            cols,
            Layout::row_major(0, t.ncols),
            false,
            parallel,
        )?;
        Ok(cols)
    }
}

/// Direct loop, one output row per task, for tiny groups.
pub(super) fn conv_direct(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    out.par_chunks_mut(lout).enumerate().for_each(|(row, y)| {
        let (b, o) = (row / cout, row % cout);
        let gi = o / cout_g;
        y.fill(bias.map_or(0.0, |bv| bv[o]));
        for c in 0..cin_g {
            let xrow = &x[(b * cin + gi * cin_g + c) * l..][..l];
            for tap in 0..k {
                let wv = w[(o * cin_g + c) * k + tap];
                let off = (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
                let r = valid_range(lout, cfg.stride, off, l);
                if r.is_empty() {
                    continue;
                }
                let first = (r.start as i128 * cfg.stride as i128 + off) as usize;
                if cfg.stride == 1 {
                    for (yv, xv) in y[r.clone()].iter_mut().zip(&xrow[first..first + r.len()]) {
                        *yv += wv * xv;
                    }
                } else {
                    for (yv, xv) in y[r]
                        .iter_mut()
                        .zip(xrow[first..].iter().step_by(cfg.stride))
                    {
                        *yv += wv * xv;
                    }
                }
            }
        }
    });
}

/// Direct scatter loop, one output row per task, for tiny groups (depthwise).
pub(super) fn transpose_direct(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    let (g, k, l, s) = (cfg.groups, cfg.kernel, cfg.length, cfg.stride);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    out.par_chunks_mut(lout).enumerate().for_each(|(row, y)| {
        let (b, o) = (row / cout, row % cout);
        let (gi, ol) = (o / cout_g, o % cout_g);
        y.fill(bias.map_or(0.0, |bv| bv[o]));
        for c in 0..cin_g {
            let ci = gi * cin_g + c;
            let xrow = &x[(b * cin + ci) * l..][..l];
            let wrow = &w[(ci * cout_g + ol) * k..][..k];
            for (tap, &wv) in wrow.iter().enumerate() {
                // x[t] lands on p = t*s + off.
                let off = (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
                let r = valid_range(l, s, off, lout);
                if r.is_empty() {
                    continue;
                }
                let first = (r.start as i128 * s as i128 + off) as usize;
                for (yv, xv) in y[first..].iter_mut().step_by(s).zip(&xrow[r]) {
                    *yv += wv * xv;
                }
            }
        }
    });
}
