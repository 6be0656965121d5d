//! The one tile driver of both convolutions, for every precision: it splits
//! the work into jobs (tiles of output columns, blocks of output channels),
//! builds the im2col rows, puts the bias in place and scatters the transposed
//! convolution's columns (col2im); the precision ([`ConvPrecision`]) packs a
//! tile's activations and runs its micro-kernel on them. Precisions differ in
//! nothing else, so a mistake here shows in the tests of all of them.
use tvm_ffi::{AnyView, Function, Result};

use super::packed::{checked_out_len, f32_forward, gcd, weight_shape};
use super::{
    call_data, col2im, fill_bias, im2col_row, parse_call, run_jobs, run_parallel, Blocks,
    Conv1dConfig, Plan, Tuning, WeightKind, TUNING,
};
use crate::gemm::{Relayed, SharedMut};
use crate::interface::Interface;
use crate::job::{internal, JobError};
use crate::precision::{with_f32_weights, Precision};
use crate::scratch::Scratch;

/// A precision's steps in the tile driver.
pub(crate) trait ConvPrecision: Precision {
    /// The registered conv1d and conv1d_transpose of the precision.
    const CONV1D: &'static Interface;
    const CONV1D_TRANSPOSE: &'static Interface;
    /// What a call's `w` holds.
    const WEIGHT_KIND: WeightKind;
    /// Whether conv1d's micro-kernel adds the bias itself (in its epilogue);
    /// otherwise the driver prefills the output with it and the micro-kernel
    /// accumulates.
    const BIAS_IN_EPILOGUE: bool = false;

    /// conv1d: rows of a tile's packed activations, in 4-byte words per
    /// output column (what sizes the tiles to the cache), for `cin_g` input
    /// channels and `k` taps per group.
    fn conv_depth(cin_g: usize, k: usize) -> usize;

    /// conv1d: packs the activations of tile `t` (its im2col block) in
    /// `scratch` and multiplies its group's weights by them into `out`:
    /// `out = (t.bias prefilled ? out : 0) + W x`, or with
    /// [`Self::BIAS_IN_EPILOGUE`] `out = W x + t.bias`.
    ///
    /// # Safety
    /// The calling job alone owns columns `t.t0..t.t0 + t.tn` of the group's
    /// rows of `out`.
    unsafe fn conv_tile(
        w: &Self::Weights<'_>,
        t: &ConvTile,
        scratch: &mut Scratch,
        out: SharedMut,
        parallel: bool,
    ) -> std::result::Result<(), JobError>;

    /// conv1d_transpose: 4-byte words of weights per output channel and tap
    /// for `cin_g` input channels (what sizes the blocks of channels).
    fn transpose_depth(cin_g: usize) -> usize;

    /// conv1d_transpose: input columns per tile, for blocks of `block_cols`
    /// weight columns (this job's: `job_cols`) and `l` input columns.
    fn transpose_tile(tuning: &Tuning, block_cols: usize, job_cols: usize, l: usize) -> usize;

    /// conv1d_transpose: packs `x^T` of tile `t` in `scratch` and multiplies it
    /// by the job's weight columns: the `[t.tn, t.ncols]` product, in `scratch`.
    fn transpose_product<'s>(
        w: &Self::Weights<'_>,
        t: &TransposeTile,
        scratch: &'s mut Scratch,
        parallel: bool,
    ) -> std::result::Result<&'s [f32], JobError>;
}

/// One tile of conv1d: output columns `t0..t0 + tn` of one batch item and group.
pub(crate) struct ConvTile<'a> {
    pub cfg: &'a Conv1dConfig,
    x: &'a [f32],
    batch: usize,
    pub group: usize,
    pub cin_g: usize,
    pub cout_g: usize,
    pub t0: usize,
    pub tn: usize,
    /// Where the tile starts in `out`: the group's first row, column `t0`.
    pub row0: usize,
    pub lout: usize,
    /// The group's bias.
    pub bias: Option<&'a [f32]>,
    /// The group's weights as AMX tiles, shared by the call's tiles (`gemm/amx/`).
    pub relayed: &'a Relayed,
}

impl ConvTile<'_> {
    /// Input channel `c` of the tile's group: a row of `x`.
    pub fn x_row(&self, c: usize) -> &[f32] {
        let (cin, l) = (self.cfg.in_channels, self.cfg.length);
        &self.x[(self.batch * cin + self.group * self.cin_g + c) * l..][..l]
    }

    /// With stride 1, position `p` of the tile's input window reads input
    /// column `t0 + p - pad_left`; of its first `span` positions, those inside
    /// the input and the column the first of them reads.
    pub fn window(&self, span: usize) -> (std::ops::Range<usize>, usize) {
        let start = self.t0 as isize - self.cfg.pad_left as isize;
        let (l, span) = (self.cfg.length as isize, span as isize);
        let valid = (-start).clamp(0, span)..(l - start).clamp(0, span);
        if valid.is_empty() {
            return (0..0, 0);
        }
        let at = (start + valid.start) as usize;
        (valid.start as usize..valid.end as usize, at)
    }

    /// Row `r` of the tile's im2col block, `r = c * K + tap`.
    pub fn im2col_row(&self, r: usize, dst: &mut [f32]) {
        let k = self.cfg.kernel;
        im2col_row(self.cfg, self.x_row(r / k), r % k, self.t0, dst);
    }
}

/// One tile of a conv1d_transpose job: input columns `t0..t0 + tn` of one
/// batch item and group, against the job's weight columns `c0..c0 + ncols`
/// (of `(o, tap)`, panels `c0 / PANEL..` of the group's packed weights).
pub(crate) struct TransposeTile<'a> {
    pub cfg: &'a Conv1dConfig,
    x: &'a [f32],
    batch: usize,
    pub group: usize,
    pub cin_g: usize,
    pub cout_g: usize,
    pub t0: usize,
    pub tn: usize,
    pub c0: usize,
    pub ncols: usize,
}

impl TransposeTile<'_> {
    /// Input channel `c` of the tile's group, at the tile's columns.
    pub fn x_row(&self, c: usize) -> &[f32] {
        let (cin, l) = (self.cfg.in_channels, self.cfg.length);
        &self.x[(self.batch * cin + self.group * self.cin_g + c) * l + self.t0..][..self.tn]
    }

    /// Where the tile's group and batch item start in `x`, and its row stride.
    pub fn x_offset(&self) -> usize {
        let (cin, l) = (self.cfg.in_channels, self.cfg.length);
        (self.batch * cin + self.group * self.cin_g) * l + self.t0
    }

    pub fn x(&self) -> &[f32] {
        self.x
    }
}

/// conv1d: per batch item, group and tile of output columns (sized to stay in
/// L2, rounded to whole panels), the bias, then the precision's packing and
/// micro-kernel straight into `out`.
pub(crate) fn conv_tiles<P: ConvPrecision>(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &P::Weights<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k) = (cfg.groups, cfg.kernel);
    let (cin_g, cout_g) = (cfg.in_channels / g, cfg.out_channels / g);
    let units = cfg.batch * g;
    let mut plan = Plan::new(units, lout, P::conv_depth(cin_g, k), tile_bytes);
    if P::PANEL > 1 {
        plan = plan.in_panels(P::PANEL, units, lout);
    }
    let out = SharedMut::new(out);
    let relayed: Vec<Relayed> = (0..g).map(|_| Relayed::new()).collect();
    run_jobs(units, &plan, |i, scratch, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (batch, group) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
        let t = ConvTile {
            cfg,
            x,
            batch,
            group,
            cin_g,
            cout_g,
            t0,
            tn,
            row0: (batch * cfg.out_channels + group * cout_g) * lout + t0,
            lout,
            bias: bias.map(|bv| &bv[group * cout_g..][..cout_g]),
            relayed: &relayed[group],
        };
        if !P::BIAS_IN_EPILOGUE {
            fill_bias(t.bias, out, t.row0, lout, tn)?;
        }
        // SAFETY: this job alone owns columns t0..t0+tn of its rows of `out`.
        unsafe { P::conv_tile(w, &t, scratch, out, parallel) }
    })
}

/// conv1d_transpose: per batch item, group and block of output channels
/// (whose weights stay in L2, whole panels), the rows prefilled with the bias;
/// per tile of input columns the precision's product `cols[t, (o, tap)] =
/// sum_c x[c, t] w[c, o, tap]`, then each `(t, o)` adds its K values to
/// `out[o, t*stride - pad_left + tap*dilation]` (col2im). The job owns its
/// output rows, so no two threads ever add to one element.
pub(crate) fn transpose_tiles<P: ConvPrecision>(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &P::Weights<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin_g, cout_g) = (cfg.in_channels / g, cfg.out_channels / g);
    let n_g = cout_g * k;
    let units = cfg.batch * g;
    let panel = P::PANEL;
    // Blocks of whole panels: ob * k a multiple of the panel width.
    let step = panel / gcd(k, panel);
    let depth = P::transpose_depth(cin_g);
    let blocks = Blocks::new(units, cout_g, k, depth, tuning.weight_bytes, step);
    let ob = blocks.size;
    let out = SharedMut::new(out);
    let job = |i: usize, scratch: &mut Scratch, parallel: bool| {
        let (unit, bi) = (i / blocks.count, i % blocks.count);
        let (batch, group) = (unit / g, unit % g);
        let o0 = bi * ob;
        let on = ob.min(cout_g - o0);
        // The job's columns (o, tap), widened to the panels that hold them.
        let c0 = o0 * k / panel * panel;
        let ncols = (((o0 + on) * k).div_ceil(panel) * panel).min(n_g) - c0;
        let row0 = (batch * cfg.out_channels + group * cout_g + o0) * lout;
        // SAFETY: this job alone owns these `on` rows of `out`.
        let rows = unsafe { out.slice(row0, on * lout)? };
        for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
            row.fill(bias.map_or(0.0, |bv| bv[group * cout_g + o0 + ol]));
        }
        let tile = P::transpose_tile(&tuning, ob * k, ncols, l);
        for t0 in (0..l).step_by(tile) {
            let t = TransposeTile {
                cfg,
                x,
                batch,
                group,
                cin_g,
                cout_g,
                t0,
                tn: tile.min(l - t0),
                c0,
                ncols,
            };
            let cols = P::transpose_product(w, &t, scratch, parallel)?;
            let _scatter = crate::counters::phase(crate::counters::Phase::Col2im);
            col2im(cfg, lout, t0, t.tn, cols, ncols, o0 * k - c0, rows);
        }
        Ok(())
    };
    run_parallel(blocks.jobs, blocks.job_parallel, job)
}

/// The registered conv1d (or with `transpose`, conv1d_transpose) of a packed
/// precision.
pub(crate) fn packed_function<P: ConvPrecision>(transpose: bool) -> Function {
    super::packed::function(packed_call::<P>, transpose)
}

fn packed_call<P: ConvPrecision>(args: &[AnyView], transpose: bool) -> Result<()> {
    let iface = if transpose {
        P::CONV1D_TRANSPOSE
    } else {
        P::CONV1D
    };
    let who = iface.name;
    let call = parse_call(iface, args, transpose, P::WEIGHT_KIND)?;
    let cfg = &call.cfg;
    let (kind, w_shape) = weight_shape(cfg, transpose);
    P::with_call_weights(who, &call.t.w, kind, cfg.groups, &w_shape, |w| {
        let (x, bias, out) = call_data(who, &call)?;
        packed_forward::<P>(cfg, transpose, &x, w, bias.as_deref(), out)
    })
}

/// conv1d (or with `transpose`, conv1d_transpose) of a packed precision on
/// dense buffers; the f32 kernels on the unpacked weights where the precision
/// is not native.
pub(crate) fn packed_forward<P: ConvPrecision>(
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w: &P::Weights<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let who = if transpose {
        P::CONV1D_TRANSPOSE.name
    } else {
        P::CONV1D.name
    };
    let (kind, w_shape) = weight_shape(cfg, transpose);
    let w_fits = P::weights_fit(w, kind, cfg.groups, &w_shape);
    let lout = checked_out_len(who, cfg, transpose, x, w_fits, bias, out)?;
    if !P::native() {
        return with_f32_weights::<P, _>(w, kind, cfg.groups, &w_shape, |f32_w| {
            f32_forward(cfg, transpose, x, f32_w, bias, out)
        });
    }
    let r = if transpose {
        transpose_tiles::<P>(cfg, lout, x, w, bias, out, TUNING)
    } else {
        conv_tiles::<P>(cfg, lout, x, w, bias, out, TUNING.tile_bytes)
    };
    r.map_err(|e| internal(who, e))
}
