//! Float32 `conv1d` by Winograd's minimal filtering F(m, r), for the stride-1,
//! ungrouped convolutions with 3, 5, 7 or 11 taps that make up most of
//! Kokoro's vocoder (its residual blocks: kernels 3, 7 and 11, dilations 1, 3
//! and 5). Weights are transformed once, at compile time.
//!
//! ```text
//! kokoro_tvm_ext.pack_winograd(w: float32 [Cout, Cin, K]) -> float32 [A, Cout, Cin]
//! kokoro_tvm_ext.conv1d_winograd(stride = 1, pad_left, pad_right, dilation, groups = 1,
//!                                has_bias, kernel_size, x, u, [bias], OUT out)
//!   x, bias, out: as for kokoro_tvm_ext.conv1d; u: w packed by pack_winograd.
//! ```
//!
//! Why: a direct convolution does `K` multiply-adds per output and input
//! channel pair. F(m, K) computes `m` outputs of one channel pair from
//! `A = m + K - 1` products, so the GEMMs shrink by `m*K/A`: 2.25x for K = 3
//! (F(6,3)), 2x for K = 5 (F(4,5)), 2.8x for K = 7 (F(4,7)), 1.83x for K = 11
//! (F(2,11)). The rounding grows with `A` (relative error about 1e-6 for
//! `A = 8`, 6e-6 for `A = 10`, 1.3e-5 for `A = 12`, against 3e-7 for the
//! direct GEMM), still far below what the vocoder's output can show. F(3,11)
//! was 1.3x faster than F(2,11) but doubled that error, enough to break the
//! bit-for-bit-ish agreement of batched and solo synthesis (1e-5 of the peak).
//!
//! How it runs: the outputs of one batch item are cut into tiles of `m`
//! outputs, `dilation` apart (so with dilation `d` each of the `d` phases
//! `t % d` is an undilated convolution of its own). A job owns a contiguous
//! range of outputs and takes its phases in turn; per phase, a block of tiles:
//! 1. gather the block's inputs, per channel, as `m` polyphase rows (row `r`
//!    holds input `r` of every tile), so that every step below reads and
//!    writes contiguous rows;
//! 2. input transform `V[a][c][n] = sum_j BT[a][j] * tile_n[c][j]`;
//! 3. `A` GEMMs `M[a] = U[a] @ V[a]`, `[Cout, Cin] x [Cin, tiles]`;
//! 4. output transform `y[o][n][i] = bias[o] + sum_a AT[i][a] * M[a][o][n]`,
//!    scattered to the tiles' outputs.
//!
//! Steps 2 and 4 run 16 tiles per step (one AVX-512 vector; four NEON
//! vectors, taken two at a time). Splitting inputs into polyphase rows
//! (without dilation) and merging the outputs of a step of tiles back into
//! sequence order are AVX-512 lane permutes or NEON interleaving loads and
//! stores ([`lanes`]).
//!
//! The transforms come from Toom-Cook interpolation at the points 0, ±1, ±2,
//! ±1/2 (and ±3/2 for `A = 10`, ±3/2 and ±2/3 for `A = 12`) and infinity,
//! computed in f64 (`transform.rs`).
//!
//! Files: `transform.rs` builds the transforms and packs the weights, `kernel.rs`
//! holds the per-job loops (gather, transforms, GEMMs) compiled per instruction
//! set, `lanes.rs` the lane permutes; their code per instruction set is in
//! `x86.rs` (AVX-512, AVX2) and `arm.rs` (NEON); the plan of the jobs is below.
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, Tensor, VALUE_ERROR};

use super::{call_data, parse_call, run_parallel, Conv1dConfig, WeightKind};
use crate::args::{dps_function, Cursor};
use crate::gemm::{threads, SharedMut};
use crate::interface;
use crate::isa::Isa;
use crate::job::{internal, JobError};
use crate::tensor::{dim, expect_shape, input, shape_of};

#[cfg(target_arch = "aarch64")]
mod arm;
mod kernel;
mod lanes;
#[cfg(test)]
mod tests;
mod transform;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use transform::Transform;

// ---------------------------------------------------------------------------
// Packed entry points.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.pack_winograd`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The registered `kokoro_tvm_ext.conv1d_winograd`.
pub fn conv1d_function() -> Function {
    dps_function(conv1d_packed)
}

fn pack_packed(args: &[AnyView]) -> Result<Tensor> {
    const WHO: &str = "pack_winograd";
    let mut c = Cursor::new(&interface::PACK_WINOGRAD, args)?;
    let w = c.tensor("w")?;
    c.finish()?;
    let ws: Vec<usize> = shape_of(&w, "pack_winograd: w", 3)?
        .iter()
        .map(|&d| dim(d))
        .collect();
    let (cout, cin, k) = (ws[0], ws[1], ws[2]);
    ensure!(
        cout > 0 && cin > 0,
        VALUE_ERROR,
        "{WHO}: w: expected no empty dimension, got shape {ws:?}"
    );
    let tr = Transform::for_taps(k, "pack_winograd: w")?;
    let u = tr.pack(cout, cin, &input::<f32>(&w, "pack_winograd: w")?);
    let shape = [tr.alpha as i64, cout as i64, cin as i64];
    Tensor::from_slice(&u, &shape)
}

fn conv1d_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "conv1d_winograd";
    let call = parse_call(
        &interface::CONV1D_WINOGRAD,
        args,
        false,
        WeightKind::Winograd,
    )?;
    let cfg = &call.cfg;
    check_geometry(cfg)?;
    let tr = Transform::for_taps(cfg.kernel, "conv1d_winograd: kernel_size")?;
    let u_shape = [tr.alpha, cfg.out_channels, cfg.in_channels].map(|d| d as i64);
    if let Err(e) = expect_shape(&call.t.w, &format!("{WHO}: w"), &u_shape) {
        bail!(
            VALUE_ERROR,
            "{} (weights packed by kokoro_tvm_ext.pack_winograd)",
            e.message()
        );
    }
    let u = input::<f32>(&call.t.w, &format!("{WHO}: w"))?;
    let (x, bias, out) = call_data(WHO, &call)?;
    conv1d_winograd_forward(cfg, &tr, &x, &u, bias.as_deref(), out)
}

fn check_geometry(cfg: &Conv1dConfig) -> Result<()> {
    ensure!(
        cfg.stride == 1,
        VALUE_ERROR,
        "conv1d_winograd: stride: only 1 is supported, got {}",
        cfg.stride
    );
    ensure!(
        cfg.groups == 1,
        VALUE_ERROR,
        "conv1d_winograd: groups: only 1 is supported, got {}",
        cfg.groups
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------

/// `conv1d` on dense row-major buffers with weights `u` packed by
/// [`Transform::pack`]: `x` `[B, Cin, L]`, `bias` `[Cout]`, `out` `[B, Cout, Lout]`.
pub fn conv1d_winograd_forward(
    cfg: &Conv1dConfig,
    tr: &Transform,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "conv1d_winograd";
    check_geometry(cfg)?;
    ensure!(
        cfg.kernel == tr.r,
        VALUE_ERROR,
        "{WHO}: the transform is for {} taps, the convolution has {}",
        tr.r,
        cfg.kernel
    );
    let Some(lout) = cfg.conv_out_len() else {
        bail!(VALUE_ERROR, "{WHO}: the output would be empty for {cfg:?}");
    };
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    ensure!(
        x.len() == cfg.batch * cin * cfg.length
            && u.len() == tr.alpha * cout * cin
            && bias.is_none_or(|b| b.len() == cout)
            && out.len() == cfg.batch * cout * lout,
        VALUE_ERROR,
        "{WHO}: buffer lengths do not match {cfg:?}"
    );
    run(Isa::best(), cfg, tr, lout, x, u, bias, out, TILE_BYTES).map_err(|e| internal(WHO, e))
}

/// About half of a 2 MiB L2 for one phase block's transformed tiles (`V` and `M`).
const TILE_BYTES: usize = 1 << 20;

/// One job: tiles `q0..q0 + nq` of every phase of batch item `b`, that is the
/// outputs `d*M*q0 .. d*M*(q0 + nq)`. A contiguous range, so that jobs running
/// at the same time never share a cache line of `out` (with one job per phase,
/// the phases of one range were written from both cores at once).
#[derive(Clone, Copy, Debug)]
struct Job {
    b: usize,
    q0: usize,
    nq: usize,
}

/// Outputs `p, p + d, p + 2d, ...` below `lout`: how many there are.
fn phase_len(lout: usize, d: usize, p: usize) -> usize {
    (lout - p).div_ceil(d)
}

/// Blocks of about `tile_bytes` of per-phase buffers, in multiples of
/// [`GEMM_COLUMNS`] tiles, and at least two jobs per thread when the tiles
/// allow blocks of 64 or more.
fn plan(cfg: &Conv1dConfig, tr: &Transform, lout: usize, tile_bytes: usize) -> Vec<Job> {
    // Phase 0 has the most tiles.
    let tiles = phase_len(lout, cfg.dilation, 0).div_ceil(tr.m);
    let per_tile = tr.alpha * (cfg.in_channels + cfg.out_channels) + tr.m * cfg.in_channels;
    let widest = (tile_bytes / (4 * per_tile)).max(64);
    let nb = widest
        .min((cfg.batch * tiles).div_ceil(2 * threads()).max(64))
        .next_multiple_of(LANES);
    let width = tiles
        .div_ceil(tiles.div_ceil(nb))
        .next_multiple_of(GEMM_COLUMNS);
    let mut jobs = Vec::new();
    for b in 0..cfg.batch {
        for q0 in (0..tiles).step_by(width) {
            jobs.push(Job {
                b,
                q0,
                nq: width.min(tiles - q0),
            });
        }
    }
    jobs
}

/// Tiles per step of the transforms: one AVX-512 vector, four NEON vectors.
const LANES: usize = 16;
/// Tiles per step of the `gemm` crate's widest f32 micro-kernel (4 AVX-512
/// vectors): blocks of 80 tiles left 16 to its 16-wide kernel, and rounding
/// them to 64 or 128 made Kokoro's synthesis 4% faster.
const GEMM_COLUMNS: usize = 64;
/// The most outputs per tile of any transform (`tile_outputs` in `transform.rs`).
const MAX_M: usize = 6;

/// What every job of one call shares.
#[derive(Clone, Copy)]
struct Call<'a> {
    cfg: &'a Conv1dConfig,
    tr: &'a Transform,
    lout: usize,
    x: &'a [f32],
    u: &'a [f32],
    bias: Option<&'a [f32]>,
    out: SharedMut,
}

/// The jobs of one call, with the loops compiled for `isa` (tests run every available one).
#[allow(clippy::too_many_arguments)]
fn run(
    isa: Isa,
    cfg: &Conv1dConfig,
    tr: &Transform,
    lout: usize,
    x: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    let jobs = plan(cfg, tr, lout, tile_bytes);
    let call = Call {
        cfg,
        tr,
        lout,
        x,
        u,
        bias,
        out: SharedMut::new(out),
    };
    let job_parallel = jobs.len() >= threads() && threads() > 1;
    run_parallel(jobs.len(), job_parallel, |i, s, par| {
        kernel::run_job(isa, &call, jobs[i], s, par)
    })
}
