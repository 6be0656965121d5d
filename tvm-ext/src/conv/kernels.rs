//! The f32 kernels: im2col tiles times the weights through the GEMM, and direct
//! loops for groups too small for a GEMM to pay off.
use super::*;

pub(super) fn conv_gemm(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let kc = cin_g * k;
    let units = cfg.batch * g;
    let plan = Plan::new(units, lout, kc, tile_bytes);
    let out = SharedMut::new(out);
    run_jobs(units, &plan, |i, col, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (b, gi) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
        // im2col block, rows (c, tap), row-major [kc, tn].
        col.set_len(kc * tn);
        for (r, dst) in col.chunks_exact_mut(tn).enumerate() {
            let xrow = &x[(b * cin + gi * cin_g + r / k) * l..][..l];
            im2col_row(cfg, xrow, r % k, t0, dst);
        }
        let row0 = (b * cout + gi * cout_g) * lout + t0;
        fill_bias(
            bias.map(|bv| &bv[gi * cout_g..][..cout_g]),
            out,
            row0,
            lout,
            tn,
        )?;
        // SAFETY: as above; rows of `out` do not alias (row stride lout >= tn).
        unsafe {
            sgemm_shared(
                cout_g,
                tn,
                kc,
                w,
                Layout::row_major(gi * cout_g * kc, kc),
                col,
                Layout::row_major(0, tn),
                out,
                Layout::row_major(row0, lout),
                bias.is_some(),
                parallel,
            )
        }
    })
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

// ---------------------------------------------------------------------------
// conv1d_transpose.
// ---------------------------------------------------------------------------

/// Column formulation: per job a block of output channels, whose weights
/// `w[c, o0..o0+on, :]` (a `[Cin/g, on*K]` block of the natural layout) stay in
/// L2 while the job walks the input in tiles. Each tile is one GEMM
/// `cols[t, (o, k)] = sum_c x[c, t] * w[c, o, k]`, then every `(t, o)` adds its
/// K contiguous values to `out[o, t*stride - pad_left + k*dilation]`.
pub(super) fn transpose_gemm(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let units = cfg.batch * g;
    // Output channels per job: the weight block within ~1 MiB, and enough jobs.
    let blocks = Blocks::new(units, cout_g, k, cin_g, tuning.weight_bytes, 1);
    let ob = blocks.size;
    // Input columns per tile: the column block [T, on*K] within the budget.
    let tile = (tuning.tile_bytes / (4 * ob * k)).clamp(16, l.max(16));
    let out = SharedMut::new(out);
    let job = |i: usize, cols: &mut Scratch, parallel: bool| -> std::result::Result<(), JobError> {
        let (unit, bi) = (i / blocks.count, i % blocks.count);
        let (b, gi) = (unit / g, unit % g);
        let o0 = bi * ob;
        let on = ob.min(cout_g - o0);
        let row0 = (b * cout + gi * cout_g + o0) * lout;
        // SAFETY: this job alone owns these `on` rows of `out`.
        let rows = unsafe { out.slice(row0, on * lout)? };
        for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
            row.fill(bias.map_or(0.0, |bv| bv[gi * cout_g + o0 + ol]));
        }
        let n = on * k;
        for t0 in (0..l).step_by(tile) {
            let tn = tile.min(l - t0);
            cols.set_len(tn * n);
            sgemm(
                tn,
                n,
                cin_g,
                x,
                Layout {
                    offset: (b * cin + gi * cin_g) * l + t0,
                    rs: 1,
                    cs: l,
                },
                w,
                Layout {
                    offset: gi * cin_g * cout_g * k + o0 * k,
                    rs: cout_g * k,
                    cs: 1,
                },
                cols,
                Layout::row_major(0, n),
                false,
                parallel,
            )?;
            col2im(cfg, lout, t0, tn, cols, n, 0, rows);
        }
        Ok(())
    };
    run_parallel(blocks.jobs, blocks.job_parallel, job)
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
