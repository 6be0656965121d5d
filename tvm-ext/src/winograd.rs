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
//! Steps 2 and 4 run 16 tiles per vector. Splitting inputs into polyphase
//! rows (without dilation) and merging the outputs of a vector of tiles back
//! into sequence order are AVX-512 lane permutes ([`lanes`]).
//!
//! The transforms come from Toom-Cook interpolation at the points 0, ±1, ±2,
//! ±1/2 (and ±3/2 for `A = 10`, ±3/2 and ±2/3 for `A = 12`) and infinity,
//! computed here in f64.
use rayon::prelude::*;
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, Tensor, VALUE_ERROR};

use crate::args::Cursor;
use crate::conv::{call_data, parse_call, valid_range, Conv1dConfig, WeightKind};
use crate::gemm::{sgemm, threads, Layout, SharedMut};
use crate::interface;
use crate::isa::Isa;
use crate::job::{internal, JobError};
use crate::scratch::Scratch;
use crate::tensor::{dim, expect_shape, input, shape_of};

/// The interpolation points besides infinity, in the order they are used.
/// Among sets of small fractions these gave the smallest measured rounding
/// for `A = 10` and `A = 12` (±3 instead of ±3/2 nearly doubled it).
const POINTS: [f64; 12] = [
    0.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
    0.5,
    -0.5,
    1.5,
    -1.5,
    2.0 / 3.0,
    -2.0 / 3.0,
    1.0 / 3.0,
];

/// Outputs per tile for a kernel of `k` taps, `None` if there is no transform.
fn tile_outputs(k: usize) -> Option<usize> {
    match k {
        3 => Some(6),
        5 | 7 => Some(4),
        11 => Some(2),
        _ => None,
    }
}

/// The matrices of F(m, r), row-major: `y = AT (G g ⊙ BT d)` for a tile `d` of
/// `alpha` inputs and a kernel `g` of `r` taps.
#[derive(Clone, Debug)]
pub struct Transform {
    pub m: usize,
    pub r: usize,
    pub alpha: usize,
    /// `m x alpha`.
    at: Vec<f32>,
    /// `alpha x alpha`.
    bt: Vec<f32>,
    /// `alpha x r`, kept in f64 for packing.
    g: Vec<f64>,
}

impl Transform {
    /// F(m, r) for kernels of `r` taps, `None` for an unsupported size.
    pub fn new(r: usize) -> Option<Self> {
        let m = tile_outputs(r)?;
        let alpha = m + r - 1;
        // Rows: the finite points, then infinity (the leading coefficient).
        let vandermonde = |n: usize| -> Vec<f64> {
            let mut v = vec![0.0; alpha * n];
            for (i, p) in POINTS[..alpha - 1].iter().enumerate() {
                for j in 0..n {
                    v[i * n + j] = p.powi(j as i32);
                }
            }
            v[alpha * n - 1] = 1.0;
            v
        };
        let (vm, c) = (vandermonde(m), invert(vandermonde(alpha), alpha));
        let at = (0..m * alpha)
            .map(|e| vm[(e % alpha) * m + e / alpha] as f32)
            .collect();
        let bt = (0..alpha * alpha)
            .map(|e| c[(e % alpha) * alpha + e / alpha] as f32)
            .collect();
        Some(Self {
            m,
            r,
            alpha,
            at,
            bt,
            g: vandermonde(r),
        })
    }

    /// [`Transform::new`], or an error naming `what` for an unsupported size.
    fn for_taps(r: usize, what: &str) -> Result<Self> {
        match Self::new(r) {
            Some(tr) => Ok(tr),
            None => bail!(
                VALUE_ERROR,
                "{what}: kernels of {r} taps have no Winograd transform (3, 5, 7 or 11)"
            ),
        }
    }

    /// `u[a][o][c] = sum_k G[a][k] * w[o][c][k]` for `w` `[cout, cin, r]`.
    pub fn pack(&self, cout: usize, cin: usize, w: &[f32]) -> Vec<f32> {
        let (a_n, r) = (self.alpha, self.r);
        let mut u = vec![0.0f32; a_n * cout * cin];
        for a in 0..a_n {
            let g = &self.g[a * r..][..r];
            for (oc, dst) in u[a * cout * cin..][..cout * cin].iter_mut().enumerate() {
                let taps = &w[oc * r..][..r];
                *dst = g
                    .iter()
                    .zip(taps)
                    .map(|(gk, wk)| gk * *wk as f64)
                    .sum::<f64>() as f32;
            }
        }
        u
    }
}

/// The inverse of the `n x n` row-major matrix `a` (Gauss-Jordan with partial
/// pivoting; only ever called on the small, well-posed Vandermonde matrices above).
fn invert(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    let mut inv: Vec<f64> = (0..n * n).map(|e| (e / n == e % n) as u8 as f64).collect();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        for j in 0..n {
            a.swap(col * n + j, pivot * n + j);
            inv.swap(col * n + j, pivot * n + j);
        }
        let p = a[col * n + col];
        for j in 0..n {
            a[col * n + j] /= p;
            inv[col * n + j] /= p;
        }
        for i in (0..n).filter(|&i| i != col) {
            let f = a[i * n + col];
            if f != 0.0 {
                for j in 0..n {
                    a[i * n + j] -= f * a[col * n + j];
                    inv[i * n + j] -= f * inv[col * n + j];
                }
            }
        }
    }
    inv
}

// ---------------------------------------------------------------------------
// Packed entry points.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.pack_winograd`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The registered `kokoro_tvm_ext.conv1d_winograd`.
pub fn conv1d_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        conv1d_packed(args)?;
        Ok(Any::default())
    })
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

/// Tiles per step of the transforms: one AVX-512 vector.
const LANES: usize = 16;
/// Tiles per step of the `gemm` crate's widest f32 micro-kernel (4 AVX-512
/// vectors): blocks of 80 tiles left 16 to its 16-wide kernel, and rounding
/// them to 64 or 128 made Kokoro's synthesis 4% faster.
const GEMM_COLUMNS: usize = 64;
/// The most outputs per tile of any transform ([`tile_outputs`]).
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
    if jobs.len() >= threads() && threads() > 1 {
        jobs.par_iter()
            .with_max_len(1)
            .try_for_each_init(Scratch::new, |s, j| run_job(isa, &call, *j, s, false))
    } else {
        let mut scratch = Scratch::new();
        jobs.iter()
            .try_for_each(|j| run_job(isa, &call, *j, &mut scratch, threads() > 1))
    }
}

/// [`tile_job`] for this call's F(m, r), compiled for `isa`.
fn run_job(
    isa: Isa,
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> std::result::Result<(), JobError> {
    match isa {
        // SAFETY: the features were detected at run time.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::avx512(call, job, s, par) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::avx2(call, job, s, par) },
        Isa::Portable => sized::<false, false>(call, job, s, par),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{sized, Call, Job, JobError, Scratch};

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512(
        call: &Call,
        job: Job,
        s: &mut Scratch,
        par: bool,
    ) -> Result<(), JobError> {
        sized::<true, true>(call, job, s, par)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(
        call: &Call,
        job: Job,
        s: &mut Scratch,
        par: bool,
    ) -> Result<(), JobError> {
        sized::<true, false>(call, job, s, par)
    }
}

/// `FMA`: fused multiply-adds; `PERM`: AVX-512 lane permutes (see [`lanes`]).
#[inline(always)]
fn sized<const FMA: bool, const PERM: bool>(
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> std::result::Result<(), JobError> {
    match (call.tr.m, call.tr.alpha) {
        (6, 8) => tile_job::<6, 8, FMA, PERM>(call, job, s, par),
        (4, 8) => tile_job::<4, 8, FMA, PERM>(call, job, s, par),
        (4, 10) => tile_job::<4, 10, FMA, PERM>(call, job, s, par),
        (2, 12) => tile_job::<2, 12, FMA, PERM>(call, job, s, par),
        (m, a) => Err(JobError::new(format!(
            "no kernel for F({m}, {})",
            a + 1 - m
        ))),
    }
}

/// `a * b + c`, fused where the instruction exists (`FMA`): `mul_add`
/// without it is a slow library call.
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `emit(i, sum_j mat[i][j] * vecs[j])` for each row `i`, lane by lane; one
/// row at a time, so that `vecs` and one accumulator stay in registers.
#[inline(always)]
fn mat_vec<const R: usize, const C: usize, const FMA: bool>(
    mat: &[[f32; C]; R],
    vecs: &[[f32; LANES]; C],
    mut emit: impl FnMut(usize, &[f32; LANES]),
) {
    for (i, row) in mat.iter().enumerate() {
        let mut acc = [0.0f32; LANES];
        for (coef, v) in row.iter().zip(vecs) {
            for (a, x) in acc.iter_mut().zip(v) {
                *a = madd::<FMA>(*coef, *x, *a);
            }
        }
        emit(i, &acc);
    }
}

/// Between `LANES * M` consecutive values (`flat[k * M + i]`) and `M` rows of
/// `LANES` (`rows[i][k]`): how the tiles' inputs are split by position in the
/// tile and their outputs merged back. Scalar loops, or `M * M` masked lane
/// permutes with AVX-512 (`PERM`): a scalar loop here cost as much as the
/// GEMMs at 128 channels.
mod lanes {
    use super::LANES;

    /// `rows[i][k] = flat[k * M + i]` for `flat` of `LANES * M` values.
    #[inline(always)]
    pub(super) fn split<const M: usize, const PERM: bool>(flat: &[f32]) -> [[f32; LANES]; M] {
        let flat = &flat[..LANES * M];
        #[cfg(target_arch = "x86_64")]
        if PERM {
            // SAFETY: `PERM` is only set in code compiled for AVX-512; `flat` has `LANES * M` values.
            return unsafe { x86::split::<M>(flat) };
        }
        std::array::from_fn(|i| std::array::from_fn(|k| flat[k * M + i]))
    }

    /// `flat[k * M + i] = rows[i][k] + add` for `flat` of `LANES * M` values.
    #[inline(always)]
    pub(super) fn merge<const M: usize, const PERM: bool>(
        rows: &[[f32; LANES]; M],
        add: f32,
        flat: &mut [f32],
    ) {
        let flat = &mut flat[..LANES * M];
        #[cfg(target_arch = "x86_64")]
        if PERM {
            // SAFETY: as in `split`.
            return unsafe { x86::merge::<M>(rows, add, flat) };
        }
        for (e, v) in flat.iter_mut().enumerate() {
            *v = rows[e % M][e / M] + add;
        }
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use super::LANES;
        use std::arch::x86_64::*;

        // Element `e` of the flat sequence sits in vector `e / LANES`, lane
        // `e % LANES`, and in row `e % M`, lane `e / M`. Each output vector
        // takes its lanes from up to `M` input vectors, one masked permute
        // each, with indices and masks that are constants per `M`.

        /// Row `i`, lane `k` is lane `(k*M + i) % LANES` of vector `(k*M + i) / LANES`.
        const fn split_tables<const M: usize>() -> ([[i32; LANES]; M], [[u16; M]; M]) {
            let (mut index, mut mask) = ([[0; LANES]; M], [[0; M]; M]);
            let mut i = 0;
            while i < M {
                let mut k = 0;
                while k < LANES {
                    let e = k * M + i;
                    index[i][k] = (e % LANES) as i32;
                    mask[i][e / LANES] |= 1 << k;
                    k += 1;
                }
                i += 1;
            }
            (index, mask)
        }

        /// Vector `j`, lane `t` is lane `(LANES*j + t) / M` of row `(LANES*j + t) % M`.
        const fn merge_tables<const M: usize>() -> ([[i32; LANES]; M], [[u16; M]; M]) {
            let (mut index, mut mask) = ([[0; LANES]; M], [[0; M]; M]);
            let mut j = 0;
            while j < M {
                let mut t = 0;
                while t < LANES {
                    let e = LANES * j + t;
                    index[j][t] = (e / M) as i32;
                    mask[j][e % M] |= 1 << t;
                    t += 1;
                }
                j += 1;
            }
            (index, mask)
        }

        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn split<const M: usize>(flat: &[f32]) -> [[f32; LANES]; M] {
            let (index, mask) = const { split_tables::<M>() };
            let v: [__m512; M] =
                std::array::from_fn(|j| _mm512_loadu_ps(flat.as_ptr().add(LANES * j)));
            let mut rows = [[0.0f32; LANES]; M];
            for (i, row) in rows.iter_mut().enumerate() {
                let idx = _mm512_loadu_si512(index[i].as_ptr().cast());
                let mut r = _mm512_setzero_ps();
                for (vj, &m) in v.iter().zip(&mask[i]) {
                    if m != 0 {
                        r = _mm512_mask_permutexvar_ps(r, m, idx, *vj);
                    }
                }
                _mm512_storeu_ps(row.as_mut_ptr(), r);
            }
            rows
        }

        #[target_feature(enable = "avx512f")]
        pub(super) unsafe fn merge<const M: usize>(
            rows: &[[f32; LANES]; M],
            add: f32,
            flat: &mut [f32],
        ) {
            let (index, mask) = const { merge_tables::<M>() };
            let add = _mm512_set1_ps(add);
            let r: [__m512; M] =
                std::array::from_fn(|i| _mm512_add_ps(_mm512_loadu_ps(rows[i].as_ptr()), add));
            for j in 0..M {
                let idx = _mm512_loadu_si512(index[j].as_ptr().cast());
                let mut v = _mm512_setzero_ps();
                for (ri, &m) in r.iter().zip(&mask[j]) {
                    if m != 0 {
                        v = _mm512_mask_permutexvar_ps(v, m, idx, *ri);
                    }
                }
                _mm512_storeu_ps(flat.as_mut_ptr().add(LANES * j), v);
            }
        }
    }
}

/// One job of F(M, A - M + 1): its tiles of each phase in turn; compiled once
/// per instruction set and size.
#[inline(always)]
fn tile_job<const M: usize, const A: usize, const FMA: bool, const PERM: bool>(
    call: &Call,
    job: Job,
    scratch: &mut Scratch,
    parallel: bool,
) -> std::result::Result<(), JobError> {
    let d = call.cfg.dilation;
    for p in 0..d.min(call.lout) {
        let tiles = phase_len(call.lout, d, p).div_ceil(M);
        let nq = job.nq.min(tiles.saturating_sub(job.q0));
        if nq > 0 {
            phase_block::<M, A, FMA, PERM>(call, job.b, p, job.q0, nq, scratch, parallel)?;
        }
    }
    Ok(())
}

/// Tiles `q0..q0 + nq` of phase `p` of batch item `b`.
#[inline(always)]
fn phase_block<const M: usize, const A: usize, const FMA: bool, const PERM: bool>(
    call: &Call,
    b: usize,
    p: usize,
    q0: usize,
    nq: usize,
    scratch: &mut Scratch,
    parallel: bool,
) -> std::result::Result<(), JobError> {
    let Call {
        cfg,
        tr,
        lout,
        x,
        u,
        bias,
        out,
    } = *call;
    let (d, l) = (cfg.dilation, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let bt: [[f32; A]; A] = std::array::from_fn(|a| std::array::from_fn(|j| tr.bt[a * A + j]));
    let at: [[f32; A]; M] = std::array::from_fn(|i| std::array::from_fn(|a| tr.at[i * A + a]));
    // Whole vectors of tiles (the GEMMs skip the padding); tile n reads
    // polyphase row j % M at n + j / M.
    let np = nq.next_multiple_of(LANES);
    let row = np + (A - 1) / M;
    let lens = [cin * M * row, A * cin * np, A * cout * np];
    scratch.set_len(lens.iter().sum());
    let (xb, rest) = scratch.split_at_mut(lens[0]);
    let (v, mm) = rest.split_at_mut(lens[1]);

    // Gather: xb[c][r][s] = x[b][c][p + d*((q0 + s)*M + r) - pad_left], zero
    // outside; undilated, whole vectors of tiles inside `x` are split by lane permutes.
    let step = d * M;
    for (c, rows) in xb.chunks_exact_mut(M * row).enumerate() {
        let xrow = &x[(b * cin + c) * l..][..l];
        let off = (p + d * q0 * M) as i128 - cfg.pad_left as i128;
        let fast = if d == 1 {
            let first = valid_range(row, M, off, l).start;
            let inside = |s: usize| off + ((s + LANES) * M) as i128 <= l as i128;
            first
                ..(first..)
                    .step_by(LANES)
                    .take_while(|&s| s + LANES <= row && inside(s))
                    .last()
                    .map_or(first, |s| s + LANES)
        } else {
            0..0
        };
        for s in fast.clone().step_by(LANES) {
            let split = lanes::split::<M, PERM>(&xrow[(off + (s * M) as i128) as usize..]);
            for (r, vals) in split.iter().enumerate() {
                rows[r * row + s..][..LANES].copy_from_slice(vals);
            }
        }
        for (r, dst) in rows.chunks_exact_mut(row).enumerate() {
            let off = off + (d * r) as i128;
            let valid = valid_range(row, step, off, l);
            let gather = |range: std::ops::Range<usize>, dst: &mut [f32]| {
                if range.is_empty() {
                    return;
                }
                let first = (range.start as i128 * step as i128 + off) as usize;
                for (o, s) in dst[range]
                    .iter_mut()
                    .zip(xrow[first..].iter().step_by(step))
                {
                    *o = *s;
                }
            };
            dst[..valid.start].fill(0.0);
            dst[valid.end..].fill(0.0);
            if fast.is_empty() {
                gather(valid, dst);
            } else {
                gather(valid.start..fast.start, dst);
                gather(fast.end..valid.end, dst);
            }
        }
    }

    // Input transform: V[a][c][n] = sum_j BT[a][j] * xb[c][j % M][n + j / M].
    for c in 0..cin {
        for n0 in (0..np).step_by(LANES) {
            let tile: [[f32; LANES]; A] = std::array::from_fn(|j| {
                let src = &xb[(c * M + j % M) * row + n0 + j / M..][..LANES];
                std::array::from_fn(|k| src[k])
            });
            mat_vec::<A, A, FMA>(&bt, &tile, |a, vals| {
                v[(a * cin + c) * np + n0..][..LANES].copy_from_slice(vals)
            });
        }
    }

    // One GEMM per point: M[a] = U[a] @ V[a].
    for a in 0..A {
        sgemm(
            cout,
            nq,
            cin,
            u,
            Layout::row_major(a * cout * cin, cin),
            v,
            Layout::row_major(a * cin * np, np),
            mm,
            Layout::row_major(a * cout * np, np),
            false,
            parallel,
        )?;
    }

    // Output transform y[i] = bias + sum_a AT[i][a] * M[a], then out; this job
    // alone owns these outputs.
    let len_p = phase_len(lout, d, p);
    let valid = len_p.saturating_sub(q0 * M).min(nq * M);
    for o in 0..cout {
        let b0 = bias.map_or(0.0, |bv| bv[o]);
        let row0 = (b * cout + o) * lout + p + d * q0 * M;
        out.check(row0, d * (valid.max(1) - 1) + 1)?;
        for n0 in (0..nq).step_by(LANES) {
            let ms: [[f32; LANES]; A] = std::array::from_fn(|a| {
                let src = &mm[(a * cout + o) * np + n0..][..LANES];
                std::array::from_fn(|k| src[k])
            });
            let mut ys = [[0.0f32; LANES]; M];
            mat_vec::<M, A, FMA>(&at, &ms, |i, y| ys[i] = *y);
            // Output (n0 + k) * M + i of the block is element k * M + i of the merged run.
            let first = n0 * M;
            let count = valid.saturating_sub(first).min(LANES * M);
            if d == 1 && count == LANES * M {
                // SAFETY: below `valid`, so checked above; disjoint from other jobs' tiles.
                lanes::merge::<M, PERM>(&ys, b0, unsafe { out.slice(row0 + first, count)? });
                continue;
            }
            let mut vals = [0.0f32; LANES * MAX_M];
            lanes::merge::<M, PERM>(&ys, b0, &mut vals);
            if d == 1 {
                // SAFETY: as above.
                unsafe { out.slice(row0 + first, count)? }.copy_from_slice(&vals[..count]);
            } else {
                for (e, val) in vals[..count].iter().enumerate() {
                    // SAFETY: as above.
                    unsafe { *out.ptr_at(row0 + d * (first + e)) = *val };
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::testing::Rng;

    #[test]
    fn transforms_reproduce_a_direct_correlation_exactly_in_f64() {
        for r in [3, 5, 7, 11] {
            let tr = Transform::new(r).unwrap();
            let (m, a_n) = (tr.m, tr.alpha);
            // Every (output i, tap k, input j): sum_a AT[i][a] G[a][k] BT[a][j] = [j == i + k].
            for i in 0..m {
                for k in 0..r {
                    for j in 0..a_n {
                        let term = |a: usize| {
                            tr.at[i * a_n + a] as f64 * tr.g[a * r + k] * tr.bt[a * a_n + j] as f64
                        };
                        let s: f64 = (0..a_n).map(term).sum();
                        // AT and BT are rounded to f32.
                        let tol = 1e-6 * (0..a_n).map(|a| term(a).abs()).sum::<f64>() + 1e-12;
                        let want = (j == i + k) as u8 as f64;
                        assert!((s - want).abs() <= tol, "F({m},{r}) i={i} k={k} j={j}: {s}");
                    }
                }
            }
        }
    }

    use crate::conv::reference::reference_conv;
    use crate::tensor::testing::assert_close_to;
    use crate::tensor::testing::Owned;
    use tvm_ffi::{TensorView, TYPE_ERROR};

    fn config(
        batch: usize,
        cin: usize,
        cout: usize,
        length: usize,
        kernel: usize,
        pads: (usize, usize),
        dilation: usize,
    ) -> Conv1dConfig {
        Conv1dConfig {
            batch,
            in_channels: cin,
            out_channels: cout,
            length,
            kernel,
            stride: 1,
            pad_left: pads.0,
            pad_right: pads.1,
            dilation,
            groups: 1,
            output_padding: 0,
        }
    }

    /// Through the registered functions: pack, then convolve; `out` starts NaN.
    fn call(
        c: &Conv1dConfig,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
    ) -> tvm_ffi::Result<Vec<f32>> {
        let lout = c.conv_out_len().unwrap();
        let mut wt = Owned::new(
            w.to_vec(),
            &[c.out_channels as i64, c.in_channels as i64, c.kernel as i64],
        );
        let wv = wt.view();
        let packed = pack_function().call_packed(&[AnyView::from(&wv)])?;
        let u: Tensor = packed.try_into().unwrap();
        let mut xt = Owned::new(
            x.to_vec(),
            &[c.batch as i64, c.in_channels as i64, c.length as i64],
        );
        let mut bt = bias.map(|b| Owned::new(b.to_vec(), &[b.len() as i64]));
        let mut ot = Owned::new(
            vec![f32::NAN; c.batch * c.out_channels * lout],
            &[c.batch as i64, c.out_channels as i64, lout as i64],
        );
        let ints = [
            1,
            c.pad_left as i64,
            c.pad_right as i64,
            c.dilation as i64,
            1,
            bias.is_some() as i64,
            c.kernel as i64,
        ];
        let mut views = vec![xt.view()];
        if let Some(b) = bt.as_mut() {
            views.push(b.view());
        }
        views.push(ot.view());
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.push(AnyView::from(&views[0]));
        args.push(AnyView::from(&u));
        args.extend(views[1..].iter().map(AnyView::from));
        conv1d_function().call_packed(&args)?;
        drop(views);
        Ok(ot.data)
    }

    #[test]
    fn matches_the_definition_on_odd_shapes_dilations_and_pads() {
        let mut rng = Rng(0x3170);
        // (batch, cin, cout, length, kernel, pads, dilation)
        let cases = [
            (1, 1, 1, 1, 3, (1, 1), 1), // length 1: one output, all padding but the centre
            (2, 5, 3, 17, 3, (1, 1), 1), // odd channels, a partial last tile
            (1, 19, 21, 40, 5, (2, 2), 1),
            (1, 7, 9, 50, 7, (9, 9), 3), // dilation: three phases
            (2, 3, 17, 61, 11, (25, 25), 5),
            (1, 6, 4, 13, 7, (0, 0), 1),     // no padding: 7 outputs
            (1, 4, 4, 30, 3, (0, 5), 2),     // lopsided pads
            (1, 33, 18, 300, 11, (5, 5), 1), // several jobs per phase
        ];
        for (batch, cin, cout, length, k, pads, d) in cases {
            let c = config(batch, cin, cout, length, k, pads, d);
            let x = rng.vec(batch * cin * length);
            let w = rng.vec(cout * cin * k);
            for bias in [None, Some(rng.vec(cout))] {
                let got = call(&c, &x, &w, bias.as_deref())
                    .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
                // F(2,11)'s transforms scale terms up before they cancel.
                let tol = if k == 11 { 2e-4 } else { 2e-5 };
                assert_close_to(
                    &format!("{c:?}"),
                    &got,
                    &reference_conv(&c, &x, &w, bias.as_deref()),
                    tol,
                );
            }
        }
    }

    #[test]
    fn every_instruction_set_and_block_size_matches_the_definition() {
        let mut rng = Rng(11);
        // (length, kernel, pads, dilation); the undilated ones split whole
        // vectors of tiles by lane permutes, the lopsided pads shift them.
        for (length, k, pads, d) in [
            (900, 7, (9, 9), 3),
            (1000, 3, (1, 1), 1),
            (777, 5, (2, 2), 1),
            (600, 11, (3, 7), 1),
        ] {
            let c = config(2, 8, 8, length, k, pads, d);
            let lout = c.conv_out_len().unwrap();
            let (x, w, bias) = (rng.vec(2 * 8 * length), rng.vec(8 * 8 * k), rng.vec(8));
            let tr = Transform::new(k).unwrap();
            let u = tr.pack(8, 8, &w);
            let want = reference_conv(&c, &x, &w, Some(&bias));
            // 4 KiB: the plan's floor of 64 tiles, several jobs per batch item.
            assert!(plan(&c, &tr, lout, 4096).len() >= 2 * 2);
            for isa in Isa::available() {
                for tile_bytes in [4096, TILE_BYTES] {
                    let mut out = vec![f32::NAN; 2 * 8 * lout];
                    run(
                        isa,
                        &c,
                        &tr,
                        lout,
                        &x,
                        &u,
                        Some(&bias),
                        &mut out,
                        tile_bytes,
                    )
                    .unwrap();
                    let tol = if k == 11 { 2e-4 } else { 2e-5 };
                    assert_close_to(&format!("{isa:?} {tile_bytes} {c:?}"), &out, &want, tol);
                }
            }
        }
    }

    #[test]
    fn lane_splits_and_merges_are_transposes() {
        fn check<const M: usize>() {
            let flat: Vec<f32> = (0..LANES * M).map(|e| e as f32).collect();
            let want: [[f32; LANES]; M] =
                std::array::from_fn(|i| std::array::from_fn(|k| (k * M + i) as f32));
            let mut merged = vec![0.0; LANES * M];
            assert_eq!(lanes::split::<M, false>(&flat), want, "M={M}");
            lanes::merge::<M, false>(&want, 0.5, &mut merged);
            assert_eq!(
                merged,
                flat.iter().map(|v| v + 0.5).collect::<Vec<_>>(),
                "M={M}"
            );
            #[cfg(target_arch = "x86_64")]
            if Isa::available().contains(&Isa::Avx512) {
                assert_eq!(lanes::split::<M, true>(&flat), want, "M={M}, AVX-512");
                lanes::merge::<M, true>(&want, 0.5, &mut merged);
                assert_eq!(
                    merged,
                    flat.iter().map(|v| v + 0.5).collect::<Vec<_>>(),
                    "M={M}, AVX-512"
                );
            }
        }
        check::<2>();
        check::<4>();
        check::<6>();
    }

    #[test]
    fn bad_calls_are_errors_that_name_the_problem() {
        let message = |r: tvm_ffi::Result<Vec<f32>>| {
            r.err().map(|e| e.message().to_string()).unwrap_or_default()
        };
        let (x, w) = (vec![0.0; 2 * 8], vec![0.0; 2 * 2 * 4]);
        let c = config(1, 2, 2, 8, 4, (0, 0), 1);
        assert!(message(call(&c, &x, &w, None))
            .contains("kernels of 4 taps have no Winograd transform"));

        // Weights not packed (torch's layout), a wrong dtype, stride 2.
        let mut xt = Owned::new(vec![0.0f32; 16], &[1, 2, 8]);
        let mut wt = Owned::new(vec![0.0f32; 12], &[2, 2, 3]);
        let mut ot = Owned::new(vec![0.0f32; 16], &[1, 2, 8]);
        let (xv, wv, ov) = (xt.view(), wt.view(), ot.view());
        let run = |ints: [i64; 7], w: &TensorView| {
            let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
            args.extend([AnyView::from(&xv), AnyView::from(w), AnyView::from(&ov)]);
            conv1d_function().call_packed(&args).err().unwrap()
        };
        let e = run([1, 1, 1, 1, 1, 0, 3], &wv);
        assert!(
            e.message()
                .contains("weights packed by kokoro_tvm_ext.pack_winograd"),
            "{}",
            e.message()
        );
        let mut u = Owned::new(vec![0.0f32; 8 * 4], &[8, 2, 2]);
        let uv = u.view();
        let e = run([2, 1, 1, 1, 1, 0, 3], &uv);
        assert!(
            e.message()
                .contains("conv1d_winograd: stride: only 1 is supported, got 2"),
            "{}",
            e.message()
        );
        let mut half = Owned::new(vec![crate::tensor::Bf16(0); 8 * 4], &[8, 2, 2]);
        let hv = half.view();
        assert_eq!(run([1, 1, 1, 1, 1, 0, 3], &hv).kind(), TYPE_ERROR);
    }

    /// Direct vs Winograd on Kokoro's vocoder shapes (release build):
    /// `cargo test -p tvm-ext --release winograd_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn winograd_speed() {
        use crate::conv::conv1d_forward;
        let mut rng = Rng(7);
        for (ch, len, k, d) in [
            (256, 2880, 3, 1),
            (256, 2880, 3, 5),
            (256, 2880, 7, 3),
            (256, 2880, 11, 1),
            (256, 2880, 11, 5),
            (128, 17280, 3, 1),
            (128, 17280, 7, 3),
            (128, 17280, 11, 5),
            (512, 600, 3, 1),
            (1024, 300, 3, 1),
            (1024, 100, 3, 1),
            (64, 5000, 7, 1),
        ] {
            let pad = d * (k - 1) / 2;
            let c = config(1, ch, ch, len, k, (pad, pad), d);
            let x = rng.vec(ch * len);
            let w = rng.vec(ch * ch * k);
            let bias = rng.vec(ch);
            let tr = Transform::new(k).unwrap();
            let u = tr.pack(ch, ch, &w);
            let mut o1 = vec![0.0; ch * len];
            let mut o2 = vec![0.0; ch * len];
            let time = |f: &mut dyn FnMut()| {
                f();
                let mut ts: Vec<f64> = (0..7)
                    .map(|_| {
                        let t = std::time::Instant::now();
                        f();
                        t.elapsed().as_secs_f64()
                    })
                    .collect();
                ts.sort_by(f64::total_cmp);
                ts[3]
            };
            let td = time(&mut || conv1d_forward(&c, &x, &w, Some(&bias), &mut o1).unwrap());
            let tw = time(&mut || {
                conv1d_winograd_forward(&c, &tr, &x, &u, Some(&bias), &mut o2).unwrap()
            });
            let err = o1
                .iter()
                .zip(&o2)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum::<f64>()
                .sqrt()
                / o1.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
            let gf = 2.0 * (ch * ch * k * len) as f64 / 1e9;
            println!("C={ch:5} L={len:6} K={k:2} d={d}: direct {:7.2} ms ({:5.0} GF/s) winograd {:7.2} ms ({:4.2}x) rel err {err:.1e}",
                td * 1e3, gf / td, tw * 1e3, td / tw);
        }
    }

    #[test]
    fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
        use crate::tensor::fuzz::{
            call_returning, check, conv_bad_scalars, conv_scalars, elements, size, Call, Spec,
            Value,
        };
        use crate::tensor::testing::Rng;
        let mut rng = Rng(0x3196_0001);
        for _ in 0..24 {
            let k = [3, 5, 7, 11][rng.below(4)];
            let c = Conv1dConfig {
                batch: size(&mut rng, 2),
                in_channels: 1 + rng.below(5),
                out_channels: 1 + rng.below(5),
                length: size(&mut rng, 40),
                kernel: k,
                stride: 1,
                pad_left: rng.below(12),
                pad_right: rng.below(12),
                dilation: 1 + rng.below(3),
                groups: 1,
                output_padding: 0,
            };
            let Some(lout) = c.conv_out_len() else {
                continue;
            };
            let has_bias = rng.below(2) == 1;
            let (cin, cout) = (c.in_channels as i64, c.out_channels as i64);
            let w_shape = [cout, cin, k as i64];
            let (x, w, bias) = (
                rng.vec(c.batch * c.in_channels * c.length),
                rng.vec(c.out_channels * c.in_channels * k),
                rng.vec(c.out_channels),
            );
            let want = reference_conv(&c, &x, &w, has_bias.then_some(&bias[..]));
            // Pack through the registry, from a random layout of w.
            let pack = vec![("w", Value::Tensor(Spec::input(w.clone(), &w_shape)))];
            let u = call_returning("kokoro_tvm_ext.pack_winograd", &pack, &mut rng).unwrap();
            let u_shape = u.shape().to_vec();
            let pack_call = Call {
                global: "kokoro_tvm_ext.pack_winograd",
                args: pack,
                want: vec![],
                rel: 0.0,
                bad: vec![],
            };
            check(&pack_call, &mut rng);
            let mut args = conv_scalars(&c, false, has_bias, &[("kernel_size", k as i64)]);
            args.push((
                "x",
                Value::Tensor(Spec::input(x, &[c.batch as i64, cin, c.length as i64])),
            ));
            args.push((
                "w",
                Value::Tensor(Spec::derived(elements::<f32>(&u), &u_shape)),
            ));
            if has_bias {
                args.push(("bias", Value::Tensor(Spec::derived(bias, &[cout]))));
            }
            let out = [c.batch as i64, cout, lout as i64];
            args.push(("out", Value::Tensor(Spec::output(&out).deciding())));
            let mut bad = conv_bad_scalars(&c, false);
            bad.extend([
                ("stride", Value::Int(2)),
                ("groups", Value::Int(2)),
                ("kernel_size", Value::Int(4)),
                ("kernel_size", Value::Int(0)),
            ]);
            let call = Call {
                global: "kokoro_tvm_ext.conv1d_winograd",
                args,
                want: vec![("out", want)],
                rel: if k == 11 { 2e-4 } else { 2e-5 },
                bad,
            };
            check(&call, &mut rng);
        }
    }
}
