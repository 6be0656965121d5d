//! One job of the Winograd convolution: per phase, gather the inputs, transform
//! them, one GEMM per point, transform the outputs back; compiled once per
//! instruction set and transform size.
use super::{lanes, phase_len, Call, Job, LANES, MAX_M};
use crate::conv::valid_range;
use crate::gemm::{sgemm, Layout};
use crate::isa::Isa;
use crate::job::JobError;
use crate::scratch::Scratch;

/// [`tile_job`] for this call's F(m, r), compiled for `isa`.
pub(super) fn run_job(
    isa: Isa,
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> std::result::Result<(), JobError> {
    match isa {
        // SAFETY: the features were detected at run time.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Avx512Bf16 | Isa::AmxInt8 | Isa::AmxBf16 => unsafe {
            super::x86::avx512(call, job, s, par)
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { super::x86::avx2(call, job, s, par) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => unsafe {
            super::arm::job(call, job, s, par)
        },
        Isa::Portable => sized::<false, false>(call, job, s, par),
    }
}

/// `FMA`: fused multiply-adds; `SIMD`: the instruction set's own vector code,
/// AVX-512 lane permutes or NEON interleaving loads and stores (see [`lanes`]),
/// and on NEON the transforms' products ([`super::arm::mat_vec`]).
#[inline(always)]
pub(super) fn sized<const FMA: bool, const SIMD: bool>(
    call: &Call,
    job: Job,
    s: &mut Scratch,
    par: bool,
) -> std::result::Result<(), JobError> {
    match (call.tr.m, call.tr.alpha) {
        (6, 8) => tile_job::<6, 8, FMA, SIMD>(call, job, s, par),
        (4, 8) => tile_job::<4, 8, FMA, SIMD>(call, job, s, par),
        (4, 10) => tile_job::<4, 10, FMA, SIMD>(call, job, s, par),
        (2, 12) => tile_job::<2, 12, FMA, SIMD>(call, job, s, par),
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

/// A transform's matrix, by rows and by columns (the NEON product walks the columns).
struct Mat<const R: usize, const C: usize> {
    rows: [[f32; C]; R],
    #[cfg(target_arch = "aarch64")]
    cols: [[f32; R]; C],
}

impl<const R: usize, const C: usize> Mat<R, C> {
    /// The matrix with element `(i, j)` at `flat[i * C + j]`.
    fn new(flat: &[f32]) -> Self {
        Self {
            rows: std::array::from_fn(|i| std::array::from_fn(|j| flat[i * C + j])),
            #[cfg(target_arch = "aarch64")]
            cols: std::array::from_fn(|j| std::array::from_fn(|i| flat[i * C + j])),
        }
    }
}

/// `emit(i, k0, sum_j mat[i][j] * vecs[j][k0..])` for each row `i`, lane by
/// lane, in runs of lanes starting at `k0`; one row at a time, so that `vecs`
/// and one accumulator stay in registers. Each lane sums over `j` in order,
/// from zero: the NEON code gives the bits of the portable code with `FMA`.
#[inline(always)]
fn mat_vec<const R: usize, const C: usize, const FMA: bool, const SIMD: bool>(
    mat: &Mat<R, C>,
    vecs: &[[f32; LANES]; C],
    mut emit: impl FnMut(usize, usize, &[f32]),
) {
    #[cfg(target_arch = "aarch64")]
    if SIMD {
        // SAFETY: `SIMD` is only set in code compiled for NEON on aarch64.
        return unsafe { super::arm::mat_vec(&mat.cols, vecs, emit) };
    }
    for (i, row) in mat.rows.iter().enumerate() {
        let mut acc = [0.0f32; LANES];
        for (coef, v) in row.iter().zip(vecs) {
            for (a, x) in acc.iter_mut().zip(v) {
                *a = madd::<FMA>(*coef, *x, *a);
            }
        }
        emit(i, 0, &acc);
    }
}

/// One job of F(M, A - M + 1): its tiles of each phase in turn; compiled once
/// per instruction set and size.
#[inline(always)]
fn tile_job<const M: usize, const A: usize, const FMA: bool, const SIMD: bool>(
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
            phase_block::<M, A, FMA, SIMD>(call, job.b, p, job.q0, nq, scratch, parallel)?;
        }
    }
    Ok(())
}

/// Tiles `q0..q0 + nq` of phase `p` of batch item `b`.
#[inline(always)]
fn phase_block<const M: usize, const A: usize, const FMA: bool, const SIMD: bool>(
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
    let transforms = crate::counters::phase(crate::counters::Phase::WinogradTransforms);
    let (d, l) = (cfg.dilation, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let bt = Mat::<A, A>::new(&tr.bt);
    let at = Mat::<M, A>::new(&tr.at);
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
            let split = lanes::split::<M, SIMD>(&xrow[(off + (s * M) as i128) as usize..]);
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
            mat_vec::<A, A, FMA, SIMD>(&bt, &tile, |a, k0, vals| {
                v[(a * cin + c) * np + n0 + k0..][..vals.len()].copy_from_slice(vals)
            });
        }
    }

    // One GEMM per point: M[a] = U[a] @ V[a].
    drop(transforms);
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
    let _transforms = crate::counters::phase(crate::counters::Phase::WinogradTransforms);
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
            mat_vec::<M, A, FMA, SIMD>(&at, &ms, |i, k0, y| {
                ys[i][k0..k0 + y.len()].copy_from_slice(y)
            });
            // Output (n0 + k) * M + i of the block is element k * M + i of the merged run.
            let first = n0 * M;
            let count = valid.saturating_sub(first).min(LANES * M);
            if d == 1 && count == LANES * M {
                // SAFETY: below `valid`, so checked above; disjoint from other jobs' tiles.
                lanes::merge::<M, SIMD>(&ys, b0, unsafe { out.slice(row0 + first, count)? });
                continue;
            }
            let mut vals = [0.0f32; LANES * MAX_M];
            lanes::merge::<M, SIMD>(&ys, b0, &mut vals);
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
