//! How the convolutions split their work, for every variant (f32, bf16,
//! Winograd): tiles of output columns sized to the cache, blocks of output
//! channels for the transposed convolutions, jobs over rayon's pool, and the
//! im2col / col2im pieces of the tile driver (`driver.rs`).
use super::*;

/// The `j` in `0..n` for which `j * s + off` lies in `0..limit`, as a range.
///
/// Runs once per im2col row, so it divides in i64 (an i128 division is a slow
/// library call): `off` is an offset into a buffer, far inside i64's range.
pub(crate) fn valid_range(n: usize, s: usize, off: i128, limit: usize) -> std::ops::Range<usize> {
    let (s, off, n) = (s as i64, off as i64, n as i64);
    let ceil_div = |a: i64| -> i64 {
        if s == 1 {
            a
        } else {
            a.div_euclid(s) + (a.rem_euclid(s) != 0) as i64
        }
    };
    let lo = ceil_div(-off).clamp(0, n);
    let hi = ceil_div(limit as i64 - off).clamp(lo, n);
    lo as usize..hi as usize
}

/// Knobs of the kernels; tests vary them to cover every path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Bytes of the column block (im2col or GEMM result) of one tile.
    pub tile_bytes: usize,
    /// Bytes of the weight block a transposed-convolution job keeps hot.
    pub weight_bytes: usize,
    /// Force the direct loop (`Some(true)`) or the GEMM (`Some(false)`).
    pub direct: Option<bool>,
}

/// About half of a 2 MiB L2 for the column block of a tile, and as much for
/// the weight block of a transposed-convolution job.
pub(crate) const TUNING: Tuning = Tuning {
    tile_bytes: 1 << 20,
    weight_bytes: 1 << 20,
    direct: None,
};

/// How the columns of each (batch item, group) are split into jobs.
pub(crate) struct Plan {
    /// Tile width in columns.
    pub tile: usize,
    /// Tiles per (batch item, group).
    pub tiles: usize,
    /// Jobs run one per thread (each GEMM single-threaded); otherwise the jobs
    /// run one after another and each GEMM uses the whole pool.
    pub job_parallel: bool,
}

impl Plan {
    /// `units` independent (batch, group) pairs of `width` columns each, with an
    /// im2col block of `rows` rows per column.
    pub fn new(units: usize, width: usize, rows: usize, tile_bytes: usize) -> Self {
        let threads = threads();
        let width = width.max(1);
        let widest = (tile_bytes / (4 * rows.max(1))).clamp(16, 1024);
        let mut tiles = width.div_ceil(widest);
        // Tiles narrower than this make the GEMM inefficient.
        let wide_enough = |t: usize| width / t >= 48;
        if threads > 1 {
            // At least two jobs per thread if possible, else one.
            for want in [2 * threads, threads] {
                let t = tiles.max(want.div_ceil(units));
                if t == tiles || wide_enough(t) {
                    tiles = t;
                    break;
                }
            }
            // A job count that the threads share evenly.
            let even = (units * tiles).div_ceil(threads) * threads;
            let t = even.div_ceil(units);
            if t != tiles && units * t == even && wide_enough(t) {
                tiles = t;
            }
        }
        let tile = width.div_ceil(tiles);
        let tiles = width.div_ceil(tile);
        let jobs = units * tiles;
        let job_parallel = threads > 1 && (jobs >= 2 * threads || jobs.is_multiple_of(threads));
        Self {
            tile,
            tiles,
            job_parallel,
        }
    }

    /// The tiles rounded up to whole panels of `panel` columns (the bf16
    /// GEMM's) when wider than one, for the same `units` and `width` as [`Plan::new`].
    pub fn in_panels(mut self, panel: usize, units: usize, width: usize) -> Self {
        if self.tile > panel {
            self.tile = self.tile.next_multiple_of(panel);
            self.tiles = width.div_ceil(self.tile);
            let jobs = units * self.tiles;
            self.job_parallel &= jobs >= 2 * threads() || jobs.is_multiple_of(threads());
        }
        self
    }
}

/// How a transposed convolution splits the output channels of each (batch
/// item, group) into jobs: blocks whose weights (`k` taps of `depth` inner
/// rows per channel, 4 bytes each) stay within `weight_bytes`, at least two
/// jobs per thread where the channels allow, and a multiple of `step` channels
/// when larger than that.
pub(crate) struct Blocks {
    /// Output channels per block.
    pub size: usize,
    /// Blocks per (batch item, group).
    pub count: usize,
    /// Blocks of all `units` (batch item, group) pairs.
    pub jobs: usize,
    /// Jobs run one per thread (each GEMM single-threaded); otherwise the jobs
    /// run one after another and each GEMM uses the whole pool.
    pub job_parallel: bool,
}

impl Blocks {
    pub fn new(
        units: usize,
        cout_g: usize,
        k: usize,
        depth: usize,
        weight_bytes: usize,
        step: usize,
    ) -> Self {
        let threads = threads();
        let mut size = (weight_bytes / (4 * k * depth.max(1))).clamp(1, cout_g);
        if threads > 1 {
            let per_unit = (2 * threads).div_ceil(units);
            size = size.min(cout_g.div_ceil(per_unit).max(1));
        }
        if size > step {
            size = size / step * step;
        }
        let count = cout_g.div_ceil(size);
        let jobs = units * count;
        Self {
            size,
            count,
            jobs,
            job_parallel: threads > 1 && jobs >= threads,
        }
    }
}

/// Runs `job(index, scratch, gemm_parallel)` for every job index per `plan`.
pub(crate) fn run_jobs<F>(units: usize, plan: &Plan, job: F) -> std::result::Result<(), JobError>
where
    F: Fn(usize, &mut Scratch, bool) -> std::result::Result<(), JobError> + Sync,
{
    run_parallel(units * plan.tiles, plan.job_parallel, job)
}

/// Runs `job(index, scratch, gemm_parallel)` for the indices `0..jobs`: with
/// `job_parallel` one job per thread, each with a single-threaded GEMM, else one
/// after another, each GEMM on the whole pool.
pub(crate) fn run_parallel<F>(
    jobs: usize,
    job_parallel: bool,
    job: F,
) -> std::result::Result<(), JobError>
where
    F: Fn(usize, &mut Scratch, bool) -> std::result::Result<(), JobError> + Sync,
{
    if job_parallel {
        (0..jobs)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each_init(Scratch::new, |scratch, i| job(i, scratch, false))
    } else {
        let mut scratch = Scratch::new();
        (0..jobs).try_for_each(|i| job(i, &mut scratch, threads() > 1))
    }
}

/// Row `(c, tap)` of the im2col block of output columns `t0..t0 + dst.len()`:
/// `dst[j] = xrow[(t0 + j) * stride + tap * dilation - pad_left]`, zero where
/// that falls outside `xrow` (the padding).
pub(crate) fn im2col_row(cfg: &Conv1dConfig, xrow: &[f32], tap: usize, t0: usize, dst: &mut [f32]) {
    let tn = dst.len();
    let off = (t0 * cfg.stride) as i128 + (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
    let r = valid_range(tn, cfg.stride, off, xrow.len());
    // Zero padding; the buffer holds stale data.
    dst[..r.start].fill(0.0);
    dst[r.end..].fill(0.0);
    if r.is_empty() {
        return;
    }
    // In range, so `j * stride + off` is a valid index of `xrow`.
    let first = (r.start as i128 * cfg.stride as i128 + off) as usize;
    if cfg.stride == 1 {
        dst[r.clone()].copy_from_slice(&xrow[first..first + r.len()]);
    } else {
        for (d, s) in dst[r]
            .iter_mut()
            .zip(xrow[first..].iter().step_by(cfg.stride))
        {
            *d = *s;
        }
    }
}

/// Sets columns `row0 + o * lout ..+ tn` of `out` to `bias[o]`, for every `o`
/// of the job's rows (nothing without a bias: the GEMM then overwrites).
pub(crate) fn fill_bias(
    bias: Option<&[f32]>,
    out: SharedMut,
    row0: usize,
    lout: usize,
    tn: usize,
) -> std::result::Result<(), JobError> {
    for (o, &v) in bias.unwrap_or(&[]).iter().enumerate() {
        // SAFETY: the calling job alone owns these columns of its rows.
        unsafe { out.slice(row0 + o * lout, tn)? }.fill(v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// conv1d.
// ---------------------------------------------------------------------------

/// Adds a tile of transposed-convolution columns into the job's output rows:
/// for input columns `t0..t0 + tn`, `cols[tt * ld + off + o * K + kk]` goes to
/// `rows[o][(t0 + tt) * stride - pad_left + kk * dilation]`, clipped to the
/// output (col2im). `rows` holds whole output rows of `lout`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn col2im(
    cfg: &Conv1dConfig,
    lout: usize,
    t0: usize,
    tn: usize,
    cols: &[f32],
    ld: usize,
    off: usize,
    rows: &mut [f32],
) {
    let (k, s, d) = (cfg.kernel, cfg.stride, cfg.dilation);
    for tt in 0..tn {
        let base = ((t0 + tt) * s) as i128 - cfg.pad_left as i128;
        // Taps kk with 0 <= base + kk*d < lout.
        let r = valid_range(k, d, base, lout);
        if r.is_empty() {
            continue;
        }
        let first = (base + (r.start * d) as i128) as usize;
        for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
            let src = &cols[tt * ld + off + ol * k..][..k][r.clone()];
            if d == 1 {
                for (y, v) in row[first..first + src.len()].iter_mut().zip(src) {
                    *y += v;
                }
            } else {
                for (y, v) in row[first..].iter_mut().step_by(d).zip(src) {
                    *y += v;
                }
            }
        }
    }
}
