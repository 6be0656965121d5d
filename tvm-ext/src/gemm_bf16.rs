//! The bf16 GEMM behind the `precision="bf16"` kernels (`bf16.rs`):
//! `C (f32) (+)= A × B` with both operands rounded to bf16 and fp32 accumulation.
//!
//! Operands are packed in pairs along the inner dimension K, the layout
//! `VDPBF16PS` reads: one `u32` holds `(v[2q], v[2q + 1])`, the even element in
//! its low half. With `kp = ceil(k / 2)` and zeros past every edge:
//!
//! - [`PackedA`], the broadcast operand (`rows x k`), in panels of [`MR`] rows:
//!   `data[(panel * kp + q) * MR + r] = (A[panel*MR + r, 2q], A[panel*MR + r, 2q+1])`.
//! - [`PackedB`], the vector operand (`k x cols`), in panels of [`NR`] columns:
//!   `data[(panel * kp + q) * NR + c] = (B[2q, panel*NR + c], B[2q+1, panel*NR + c])`.
//!
//! Either operand can be the prepacked weights: conv1d multiplies packed weights
//! (A) by its im2col tile (B, packed per call); the transposed convolution and
//! matmul multiply their packed input (A) by packed weights (B).
//!
//! The inner loop, an `MR x NR` register tile of 16 zmm accumulators, uses
//! `VDPBF16PS` where the CPU has AVX512-BF16 (checked once per process, see
//! [`isa`]), else plain Rust. `KOKORO_TVM_EXT_NO_BF16=1` hides AVX512-BF16, so
//! the fallbacks can be tested on any machine.
//!
//! Measured on the project's Xeon (Emerald Rapids, no AMX exposed), one core:
//! `VDPBF16PS` retires about one per two cycles, so this GEMM peaks at ~85
//! GFLOP/s, while the f32 `gemm` crate reaches ~150: on such CPUs bf16 saves
//! memory, not time (`bench_gemm_bf16`). AMD Zen 4 issues it at the FMA rate:
//! 220-225 GFLOP/s per core against 103-109 for the f32 crate.
use rayon::prelude::*;

use crate::gemm::{threads, SharedMut};
use crate::job::JobError;

/// Rows of a [`PackedA`] panel: the register tile's height.
pub const MR: usize = 8;
/// Columns of a [`PackedB`] panel: the register tile's width, two zmm vectors.
pub const NR: usize = 32;
/// Pairs of K per cache block: a B micro-panel (`KC * NR * 4` bytes, 32 KiB)
/// stays in L1 while the tile walks down the rows.
const KC: usize = 256;

// ---------------------------------------------------------------------------
// Conversions.
// ---------------------------------------------------------------------------

/// f32 → bf16 as `VCVTNE2PS2BF16` does it: round to nearest even, denormals
/// to zero (keeping the sign), NaN stays a quiet NaN.
#[inline]
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        ((b >> 16) | 0x40) as u16
    } else if b & 0x7f80_0000 == 0 {
        ((b >> 16) & 0x8000) as u16
    } else {
        // Infinity stays infinity: its low half is zero, so no carry.
        ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// bf16 → f32, exact.
#[inline]
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// `x` rounded to bf16 and back: what the GEMM computes with.
#[inline]
pub fn round_bf16(x: f32) -> f32 {
    from_bf16(to_bf16(x))
}

/// The packed pair `(lo, hi)`.
#[inline]
fn pair(lo: f32, hi: f32) -> u32 {
    to_bf16(lo) as u32 | (to_bf16(hi) as u32) << 16
}

/// A f32 scratch buffer seen as `u32`s (same size and alignment, every bit
/// pattern valid for both), so packed operands can use the f32 scratch pool.
pub(crate) fn as_u32(s: &mut [f32]) -> &mut [u32] {
    // SAFETY: f32 and u32 have the same size and alignment, and any bits are a
    // valid u32; the borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u32, s.len()) }
}

// ---------------------------------------------------------------------------
// Packed operands.
// ---------------------------------------------------------------------------

/// Pairs along an inner dimension of `k` elements.
pub const fn pairs(k: usize) -> usize {
    k.div_ceil(2)
}

/// The broadcast operand, `rows x k`, in panels of [`MR`] rows (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedA<'a> {
    pub data: &'a [u32],
    pub rows: usize,
    pub k: usize,
}

/// The vector operand, `k x cols`, in panels of [`NR`] columns (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedB<'a> {
    pub data: &'a [u32],
    pub cols: usize,
    pub k: usize,
}

impl PackedA<'_> {
    /// `u32`s of a packed `rows x k` operand.
    pub const fn len(rows: usize, k: usize) -> usize {
        rows.div_ceil(MR) * pairs(k) * MR
    }
}

impl<'a> PackedB<'a> {
    /// `u32`s of a packed `k x cols` operand.
    pub const fn len(k: usize, cols: usize) -> usize {
        cols.div_ceil(NR) * pairs(k) * NR
    }

    /// The panels `p0..p1` as an operand of their own (the last one may be partial).
    pub fn panels(&self, p0: usize, p1: usize) -> Result<PackedB<'a>, JobError> {
        let n = pairs(self.k) * NR;
        let total = self.cols.div_ceil(NR);
        if p0 > p1 || p1 > total || self.data.len() < total * n {
            return Err(JobError::new(format!(
                "panels {p0}..{p1} of a packed operand with {total} panels"
            )));
        }
        Ok(PackedB {
            data: &self.data[p0 * n..p1 * n],
            cols: self.cols.min(p1 * NR).saturating_sub(p0 * NR),
            k: self.k,
        })
    }
}

/// Packs `src(i, l)` (`rows x k`) as a [`PackedA`] into `dst`.
pub(crate) fn pack_a(
    rows: usize,
    k: usize,
    src: impl Fn(usize, usize) -> f32,
    dst: &mut [u32],
) -> Result<(), JobError> {
    let len = dst.len();
    pack_panels(MR, rows, k, src, dst).map_err(|want| {
        JobError::new(format!(
            "pack_a: {rows}x{k} needs {want} elements, got {len}"
        ))
    })
}

/// Packs `src(l, j)` (`k x cols`) as a [`PackedB`] into `dst`.
pub(crate) fn pack_b(
    k: usize,
    cols: usize,
    src: impl Fn(usize, usize) -> f32,
    dst: &mut [u32],
) -> Result<(), JobError> {
    let len = dst.len();
    pack_panels(NR, cols, k, |j, l| src(l, j), dst).map_err(|want| {
        JobError::new(format!(
            "pack_b: {k}x{cols} needs {want} elements, got {len}"
        ))
    })
}

/// The packing both operands share: `n` rows (of A) or columns (of B) in
/// panels of `width`, each panel `k` deep in bf16 pairs, zero beyond `n` and
/// `k`; `src(along, l)`. Errs with the length `dst` should have.
fn pack_panels(
    width: usize,
    n: usize,
    k: usize,
    src: impl Fn(usize, usize) -> f32,
    dst: &mut [u32],
) -> Result<(), usize> {
    let kp = pairs(k);
    let want = n.div_ceil(width) * kp * width;
    if dst.len() != want {
        return Err(want);
    }
    let at = |i: usize, l: usize| if i < n && l < k { src(i, l) } else { 0.0 };
    if kp == 0 {
        return Ok(());
    }
    for (p, panel) in dst.chunks_exact_mut(kp * width).enumerate() {
        for (q, slot) in panel.chunks_exact_mut(width).enumerate() {
            for (r, v) in slot.iter_mut().enumerate() {
                let i = p * width + r;
                *v = pair(at(i, 2 * q), at(i, 2 * q + 1));
            }
        }
    }
    Ok(())
}

/// Writes pair `q` of every panel of a packed operand with `kp` pairs, panels
/// `width` wide ([`MR`] for a [`PackedA`], [`NR`] for a [`PackedB`]) and
/// `lo.len()` rows or columns along the panels: `(lo[j], hi[j])`, or
/// `(lo[j], 0)` without `hi`. The fast way to pack two contiguous rows: an
/// im2col tile, or two channels of `x` read as columns of `x^T`.
pub(crate) fn pack_pair(
    lo: &[f32],
    hi: Option<&[f32]>,
    q: usize,
    kp: usize,
    width: usize,
    dst: &mut [u32],
) -> Result<(), JobError> {
    let n = lo.len();
    if q >= kp
        || !(width == MR || width == NR)
        || hi.is_some_and(|h| h.len() != n)
        || dst.len() != n.div_ceil(width) * kp * width
    {
        return Err(JobError::new(format!(
            "pack_pair: pair {q} of {kp}, {n} values, panels of {width}, {} packed elements",
            dst.len()
        )));
    }
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Native {
        // SAFETY: AVX512-BF16 (and so AVX-512F/BW) is present; lengths checked above.
        unsafe { x86::pack_pair_native(lo, hi, q, kp, width, dst) };
        return Ok(());
    }
    for (p, panel) in dst.chunks_exact_mut(kp * width).enumerate() {
        for (c, v) in panel[q * width..(q + 1) * width].iter_mut().enumerate() {
            let j = p * width + c;
            *v = if j < n {
                pair(lo[j], hi.map_or(0.0, |h| h[j]))
            } else {
                0
            };
        }
    }
    Ok(())
}

/// The two values of a packed pair.
fn halves(p: u32) -> [f32; 2] {
    [from_bf16(p as u16), from_bf16((p >> 16) as u16)]
}

/// Writes the f32 values of a packed `rows x k` [`PackedA`] into `out`
/// (row-major, `rows * k`), one panel of [`MR`] rows per rayon job.
pub(crate) fn unpack_a_into(data: &[u32], rows: usize, k: usize, out: &mut [f32]) {
    let kp = pairs(k);
    if k == 0 {
        return;
    }
    out[..rows * k]
        .par_chunks_mut(MR * k)
        .enumerate()
        .for_each(|(panel, dst)| {
            let src = &data[panel * kp * MR..][..kp * MR];
            for (q, pairs) in src.chunks_exact(MR).enumerate() {
                for (r, row) in dst.chunks_exact_mut(k).enumerate() {
                    let [lo, hi] = halves(pairs[r]);
                    row[2 * q] = lo;
                    if 2 * q + 1 < k {
                        row[2 * q + 1] = hi;
                    }
                }
            }
        });
}

/// Writes the f32 values of a packed `k x cols` [`PackedB`] into `out`
/// (row-major, `k * cols`), one pair of rows per rayon job.
pub(crate) fn unpack_b_into(data: &[u32], k: usize, cols: usize, out: &mut [f32]) {
    let kp = pairs(k);
    if cols == 0 {
        return;
    }
    out[..k * cols]
        .par_chunks_mut(2 * cols)
        .enumerate()
        .for_each(|(q, dst)| {
            // Rows 2q and 2q + 1 (none when k is odd and this is the last pair).
            let (even, odd) = dst.split_at_mut(cols);
            let pair = |j: usize| halves(data[((j / NR) * kp + q) * NR + j % NR]);
            for (j, v) in even.iter_mut().enumerate() {
                *v = pair(j)[0];
            }
            for (j, v) in odd.iter_mut().enumerate() {
                *v = pair(j)[1];
            }
        });
}

// ---------------------------------------------------------------------------
// Picking the inner loop.
// ---------------------------------------------------------------------------

/// The inner loop of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// `VDPBF16PS` (AVX512-BF16).
    Native,
    /// Plain Rust: correct anywhere, but slow; the kernels of `bf16.rs` use the
    /// f32 path instead when [`native_bf16`] is false.
    Portable,
}

/// Whether `KOKORO_TVM_EXT_NO_BF16` asks to ignore AVX512-BF16 (any value but
/// empty or "0").
pub fn bf16_disabled_by_env() -> bool {
    std::env::var("KOKORO_TVM_EXT_NO_BF16").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether this CPU has AVX512-BF16 and the environment does not hide it: the
/// condition for the bf16 kernels to run in bf16 (`bf16.rs` falls back to f32
/// otherwise). Read once per process.
pub fn native_bf16() -> bool {
    isa() == Isa::Native
}

/// The inner loop this process uses, detected once.
pub fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| detect(bf16_disabled_by_env()))
}

fn detect(no_bf16: bool) -> Isa {
    #[cfg(target_arch = "x86_64")]
    if !no_bf16
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16")
    {
        return Isa::Native;
    }
    let _ = no_bf16;
    Isa::Portable
}

// ---------------------------------------------------------------------------
// The GEMM.
// ---------------------------------------------------------------------------

/// `C = (accumulate ? C : 0) + A × B` with `C` the row-major `a.rows x b.cols`
/// block at `c_offset` of `c` with `ldc` elements per row.
///
/// `parallel` splits the tiles over the rayon pool; callers that already run
/// one job per thread pass `false`.
pub(crate) fn gemm_bf16(
    a: PackedA,
    b: PackedB,
    c: &mut [f32],
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
) -> Result<(), JobError> {
    let shared = SharedMut::new(c);
    // SAFETY: `c` is borrowed mutably for the whole call.
    unsafe { gemm_bf16_shared(a, b, shared, c_offset, ldc, accumulate, parallel, isa()) }
}

/// [`gemm_bf16`] into a [`SharedMut`], with the inner loop given.
///
/// # Safety
/// While this runs, nothing else may read or write the destination block.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_bf16_shared(
    a: PackedA,
    b: PackedB,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    isa: Isa,
) -> Result<(), JobError> {
    let (m, n) = (a.rows, b.cols);
    if a.k != b.k {
        return Err(JobError::new(format!(
            "inner dimensions differ: {} and {}",
            a.k, b.k
        )));
    }
    if a.data.len() != PackedA::len(m, a.k) || b.data.len() != PackedB::len(b.k, n) {
        return Err(JobError::new(format!(
            "packed operands of {} and {} elements do not hold {m}x{k} and {k}x{n}",
            a.data.len(),
            b.data.len(),
            k = a.k
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if m > 1 && ldc < n {
        return Err(JobError::new(format!(
            "ldc {ldc} < {n} columns: rows would alias"
        )));
    }
    // The block's first and last rows, checked against the buffer (the tiles
    // only write inside the block).
    c.check(c_offset, n)?;
    c.check(c_offset + (m - 1) * ldc, n)?;
    let kp = pairs(a.k);
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    // Jobs: rectangles of panels, at least two per thread when there are enough.
    let want = if parallel { 2 * threads() } else { 1 };
    let nj = np.min(want);
    let ni = mp.min(want.div_ceil(nj));
    let job = |jid: usize| -> Result<(), JobError> {
        let (bi, bj) = (jid / nj, jid % nj);
        let (i0, i1) = (bi * mp / ni, (bi + 1) * mp / ni);
        let (j0, j1) = (bj * np / nj, (bj + 1) * np / nj);
        for k0 in (0..kp.max(1)).step_by(KC) {
            let kq = KC.min(kp - k0.min(kp));
            let acc = accumulate || k0 > 0;
            for j in j0..j1 {
                let cols = NR.min(n - j * NR);
                let bp = &b.data[(j * kp + k0) * NR..][..kq * NR];
                for i in i0..i1 {
                    let rows = MR.min(m - i * MR);
                    let ap = &a.data[(i * kp + k0) * MR..][..kq * MR];
                    let row0 = c_offset + i * MR * ldc + j * NR;
                    // The tile's rows, each `cols` long, inside the block checked above.
                    let cp = c.ptr_at(row0);
                    tile(isa, kq, ap, bp, cp, ldc, rows, cols, acc);
                }
            }
        }
        Ok(())
    };
    if ni * nj > 1 {
        (0..ni * nj)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(job)
    } else {
        job(0)
    }
}

/// One `rows x cols` tile (`rows <= MR`, `cols <= NR`) over `kq` pairs.
///
/// # Safety
/// `c` must point at `rows` rows of `cols` writable f32s, `ldc` apart, that no
/// one else touches; `a` and `b` hold `kq` pairs of one panel each.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    isa: Isa,
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    acc: bool,
) {
    debug_assert!(a.len() >= kq * MR && b.len() >= kq * NR && rows <= MR && cols <= NR);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Native => x86::tile_native(kq, a.as_ptr(), b.as_ptr(), c, ldc, rows, cols, acc),
        _ => tile_portable(kq, a, b, c, ldc, rows, cols, acc),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn tile_portable(
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    acc: bool,
) {
    let mut t = [[0.0f32; NR]; MR];
    for q in 0..kq {
        let bq = &b[q * NR..(q + 1) * NR];
        for (r, row) in t.iter_mut().enumerate() {
            let p = a[q * MR + r];
            let (ae, ao) = (f32::from_bits(p << 16), f32::from_bits(p & 0xffff_0000));
            for (v, &bv) in row.iter_mut().zip(bq) {
                *v += ae * f32::from_bits(bv << 16) + ao * f32::from_bits(bv & 0xffff_0000);
            }
        }
    }
    for (r, row) in t.iter().enumerate().take(rows) {
        let dst = std::slice::from_raw_parts_mut(c.add(r * ldc), cols);
        for (d, v) in dst.iter_mut().zip(row) {
            *d = if acc { *d + v } else { *v };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{MR, NR};

    #[inline(always)]
    fn masks(cols: usize) -> (__mmask16, __mmask16) {
        let m = |n: usize| {
            if n >= 16 {
                0xffff
            } else {
                ((1u32 << n) - 1) as __mmask16
            }
        };
        (m(cols.min(16)), m(cols.saturating_sub(16)))
    }

    /// The `MR x NR` tile with `VDPBF16PS`: per pair, two B vectors and MR
    /// broadcast pairs of A, 2·MR dot products.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile_native(
        kq: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        rows: usize,
        cols: usize,
        accumulate: bool,
    ) {
        let (m0, m1) = masks(cols);
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        if accumulate {
            for (r, t) in acc.iter_mut().enumerate() {
                if r < rows {
                    t[0] = _mm512_maskz_loadu_ps(m0, c.add(r * ldc));
                    t[1] = _mm512_maskz_loadu_ps(m1, c.add(r * ldc + 16));
                }
            }
        }
        for q in 0..kq {
            let bq = b.add(q * NR);
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq as *const _));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bq.add(16) as *const _));
            let aq = a.add(q * MR);
            for (r, t) in acc.iter_mut().enumerate() {
                let ar: __m512bh = std::mem::transmute(_mm512_set1_epi32(*aq.add(r) as i32));
                t[0] = _mm512_dpbf16_ps(t[0], ar, b0);
                t[1] = _mm512_dpbf16_ps(t[1], ar, b1);
            }
        }
        for (r, t) in acc.iter().enumerate() {
            if r < rows {
                _mm512_mask_storeu_ps(c.add(r * ldc), m0, t[0]);
                _mm512_mask_storeu_ps(c.add(r * ldc + 16), m1, t[1]);
            }
        }
    }

    /// [`super::pack_pair`] with `VCVTNE2PS2BF16`: 16 pairs per step, stored
    /// as two halves of 8 (a panel is 8 or 32 wide).
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    pub(super) unsafe fn pack_pair_native(
        lo: &[f32],
        hi: Option<&[f32]>,
        q: usize,
        kp: usize,
        width: usize,
        dst: &mut [u32],
    ) {
        let n = lo.len();
        let padded = n.div_ceil(width) * width;
        // Words 0..16 hold lo, 16..32 hi; interleave them into (lo, hi) pairs.
        let idx = _mm512_set_epi16(
            31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20,
            4, 19, 3, 18, 2, 17, 1, 16, 0,
        );
        let mut j = 0;
        while j < padded {
            let left = n.saturating_sub(j).min(16);
            let m = if left >= 16 {
                0xffff
            } else {
                ((1u32 << left) - 1) as __mmask16
            };
            let at = j.min(n);
            let l = _mm512_maskz_loadu_ps(m, lo.as_ptr().add(at));
            let h = match hi {
                Some(h) => _mm512_maskz_loadu_ps(m, h.as_ptr().add(at)),
                None => _mm512_setzero_ps(),
            };
            let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(h, l));
            let out = _mm512_permutexvar_epi16(idx, both);
            for (half, v) in [
                _mm512_castsi512_si256(out),
                _mm512_extracti64x4_epi64::<1>(out),
            ]
            .into_iter()
            .enumerate()
            {
                let jj = j + 8 * half;
                if jj < padded {
                    let at = ((jj / width) * kp + q) * width + jj % width;
                    _mm256_storeu_si256(dst.as_mut_ptr().add(at) as *mut __m256i, v);
                }
            }
            j += 16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::testing::Rng;

    fn isas() -> Vec<Isa> {
        let mut v = vec![Isa::Portable];
        if detect(false) == Isa::Native {
            v.push(Isa::Native);
        }
        v
    }

    #[test]
    fn conversion_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        assert_eq!(to_bf16(-2.0), 0xc000);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even.
        assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(to_bf16(1.0 + 1.5 / 256.0), 0x3f81);
        assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
        assert_eq!(to_bf16(f32::MAX), 0x7f80); // rounds up to infinity
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(to_bf16(-1e-40), 0x8000); // denormal → signed zero
        assert_eq!(round_bf16(1.2345), 1.234375);
    }

    /// The vector conversion agrees with [`to_bf16`] on every kind of value.
    #[test]
    fn packing_matches_scalar_conversion() {
        let mut rng = Rng(7);
        let mut special = vec![
            0.0f32,
            -0.0,
            1e-40,
            -3e-39,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::INFINITY,
            -1.0,
        ];
        special.extend((0..200).map(|i| f32::from_bits((i as u32).wrapping_mul(0x9e37_79b9))));
        special.retain(|v| !v.is_nan());
        for cols in [1usize, 5, 16, 17, 32, 33, 70, special.len()] {
            let lo: Vec<f32> = (0..cols)
                .map(|i| special[i % special.len()] * if i % 3 == 0 { rng.next() } else { 1.0 })
                .collect();
            let hi: Vec<f32> = (0..cols)
                .map(|i| special[(i * 7 + 3) % special.len()])
                .collect();
            let kp = 3;
            for q in 0..kp {
                for h in [None, Some(&hi[..])] {
                    for width in [MR, NR] {
                        let mut got = vec![0xdead_beefu32; cols.div_ceil(width) * kp * width];
                        let mut want = got.clone();
                        pack_pair(&lo, h, q, kp, width, &mut got).unwrap();
                        for (p, panel) in want.chunks_exact_mut(kp * width).enumerate() {
                            for c in 0..width {
                                let j = p * width + c;
                                panel[q * width + c] = if j < cols {
                                    to_bf16(lo[j]) as u32
                                        | (to_bf16(h.map_or(0.0, |h| h[j])) as u32) << 16
                                } else {
                                    0
                                };
                            }
                        }
                        assert_eq!(got, want, "cols {cols} q {q} width {width}");
                    }
                }
            }
        }
    }

    /// f64 GEMM of the bf16-rounded operands.
    fn reference(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<(f64, f64)> {
        let mut out = vec![(0.0, 0.0); m * n];
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for l in 0..k {
                    let t = round_bf16(a[i * k + l]) as f64 * round_bf16(b[l * n + j]) as f64;
                    s += t;
                    mag += t.abs();
                }
                out[i * n + j] = (s, mag);
            }
        }
        out
    }

    #[test]
    fn gemm_matches_f64_reference_at_odd_shapes() {
        let shapes = [
            (1usize, 1usize, 1usize),
            (1, 1, 2),
            (1, 33, 3),
            (8, 32, 2),
            (7, 31, 5),
            (9, 17, 64),
            (17, 65, 33),
            (64, 40, 513),
            (3, 100, 600),
            (70, 3, 19),
            (5, 7, 0),
        ];
        for (m, n, k) in shapes {
            let mut rng = Rng((m * 1000 + n * 10 + k) as u64);
            let (a, b) = (rng.vec(m * k), rng.vec(k * n));
            let want = reference(m, n, k, &a, &b);
            let mut pa = vec![0u32; PackedA::len(m, k)];
            let mut pb = vec![0u32; PackedB::len(k, n)];
            pack_a(m, k, |i, l| a[i * k + l], &mut pa).unwrap();
            pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
            let (mut ua, mut ub) = (vec![f32::NAN; m * k], vec![f32::NAN; k * n]);
            unpack_a_into(&pa, m, k, &mut ua);
            unpack_b_into(&pb, k, n, &mut ub);
            assert_eq!(ua, a.iter().map(|&v| round_bf16(v)).collect::<Vec<_>>());
            assert_eq!(ub, b.iter().map(|&v| round_bf16(v)).collect::<Vec<_>>());
            let pa = PackedA {
                data: &pa,
                rows: m,
                k,
            };
            let pb = PackedB {
                data: &pb,
                cols: n,
                k,
            };
            for isa in isas() {
                for (accumulate, parallel) in [(false, false), (true, true), (false, true)] {
                    // C inside a larger buffer: offset 3, ldc n + 2; the rest stays 7.
                    let ldc = n + 2;
                    let mut c = vec![7.0f32; 3 + m * ldc + 2];
                    let shared = SharedMut::new(&mut c);
                    unsafe { gemm_bf16_shared(pa, pb, shared, 3, ldc, accumulate, parallel, isa) }
                        .unwrap();
                    for i in 0..m {
                        for j in 0..ldc {
                            let got = c[3 + i * ldc + j] as f64;
                            if j >= n {
                                assert_eq!(
                                    got, 7.0,
                                    "{isa:?} {m}x{n}x{k}: wrote outside the block"
                                );
                                continue;
                            }
                            let (v, mag) = want[i * n + j];
                            let v = if accumulate { v + 7.0 } else { v };
                            // Only the f32 accumulation rounds: a few ulps of the magnitudes.
                            let tol = 1e-6 * (mag + 7.0);
                            assert!(
                                (got - v).abs() <= tol,
                                "{isa:?} {m}x{n}x{k} acc={accumulate}: [{i},{j}] got {got}, want {v}"
                            );
                        }
                    }
                    assert_eq!(&c[..3], &[7.0; 3]);
                    assert_eq!(&c[3 + m * ldc..], &[7.0; 2]);
                }
            }
        }
    }

    #[test]
    fn sub_panels_and_bad_operands() {
        let (k, n) = (5, 70);
        let mut rng = Rng(3);
        let b = rng.vec(k * n);
        let mut pb = vec![0u32; PackedB::len(k, n)];
        pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
        let whole = PackedB {
            data: &pb,
            cols: n,
            k,
        };
        let tail = whole.panels(1, 3).unwrap();
        assert_eq!(tail.cols, n - NR);
        assert!(whole.panels(2, 4).is_err());
        let a = vec![1.0f32; k];
        let mut pa = vec![0u32; PackedA::len(1, k)];
        pack_a(1, k, |_, l| a[l], &mut pa).unwrap();
        let pa = PackedA {
            data: &pa,
            rows: 1,
            k,
        };
        let mut c = vec![0.0f32; n];
        gemm_bf16(pa, tail, &mut c, 0, n, false, false).unwrap();
        for j in 0..n - NR {
            let want: f32 = (0..k).map(|l| round_bf16(b[l * n + NR + j])).sum();
            assert!((c[j] - want).abs() < 1e-5);
        }
        // A destination too small, mismatched k, a short packed buffer.
        let err = gemm_bf16(pa, tail, &mut c[..10], 0, n, false, false).unwrap_err();
        assert!(err.message.contains("outside"), "{}", err.message);
        let short = PackedB {
            data: &pb[..10],
            cols: n,
            k,
        };
        assert!(gemm_bf16(pa, short, &mut c, 0, n, false, false).is_err());
        let wrong_k = PackedB {
            data: &pb,
            cols: n,
            k: k + 1,
        };
        assert!(gemm_bf16(pa, wrong_k, &mut c, 0, n, false, false)
            .unwrap_err()
            .message
            .contains("inner"));
        assert!(pack_a(2, 3, |_, _| 0.0, &mut [0u32; 3]).is_err());
    }
}

#[cfg(test)]
mod bench {
    use super::*;
    use crate::gemm::{sgemm, Layout};

    fn cpu_seconds() -> f64 {
        let mut ts = libc_timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a plain syscall wrapper writing the struct we pass.
        unsafe {
            clock_gettime(3 /* CLOCK_THREAD_CPUTIME_ID */, &mut ts)
        };
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }

    #[repr(C)]
    struct libc_timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }

    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut libc_timespec) -> i32;
    }

    /// Single-threaded GFLOP/s per CPU second (robust on a shared machine):
    /// `cargo test --release -p tvm-ext bench_gemm_bf16 -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_gemm_bf16() {
        println!("isa of this process: {:?}", isa());
        // (M = Cout, K = Cin*K, N = tile columns) at Kokoro's conv shapes.
        for &(m, k, n) in &[
            (128usize, 896usize, 512usize),
            (256, 2816, 256),
            (512, 1536, 320),
            (512, 3584, 160),
            (64, 128, 1024),
            (128, 384, 1024),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0.0f32; m * n];
            let mut pa = vec![0u32; PackedA::len(m, k)];
            let mut pb = vec![0u32; PackedB::len(k, n)];
            pack_a(m, k, |i, l| a[i * k + l], &mut pa).unwrap();
            pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
            let flops = 2.0 * (m * n * k) as f64;
            let reps = ((3e9 / flops) as usize).max(3);
            let time = |f: &mut dyn FnMut()| {
                f();
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let t = cpu_seconds();
                    for _ in 0..reps {
                        f();
                    }
                    best = best.min((cpu_seconds() - t) / reps as f64);
                }
                flops / best / 1e9
            };
            let f32_rate = time(&mut || {
                sgemm(
                    m,
                    n,
                    k,
                    &a,
                    Layout::row_major(0, k),
                    &b,
                    Layout::row_major(0, n),
                    &mut c,
                    Layout::row_major(0, n),
                    false,
                    false,
                )
                .unwrap()
            });
            let mut line = format!("{m}x{k}x{n}: f32 gemm {f32_rate:.1}");
            for which in [Isa::Native, Isa::Portable] {
                if detect(false) != Isa::Native && which == Isa::Native {
                    continue;
                }
                let (pa, pb) = (
                    PackedA {
                        data: &pa,
                        rows: m,
                        k,
                    },
                    PackedB {
                        data: &pb,
                        cols: n,
                        k,
                    },
                );
                let rate = time(&mut || unsafe {
                    gemm_bf16_shared(pa, pb, SharedMut::new(&mut c), 0, n, false, false, which)
                        .unwrap()
                });
                line += &format!(", bf16 {which:?} {rate:.1}");
            }
            // Packing the im2col tile (B) each call, as conv1d does.
            let mut lo = vec![0.0f32; n];
            let kp = pairs(k);
            let pack_rate = time(&mut || {
                for q in 0..kp {
                    lo[0] = q as f32;
                    pack_pair(&lo, Some(&b[..n]), q, kp, NR, &mut pb).unwrap();
                }
            });
            println!(
                "{line} GFLOP/s per core; packing B costs {:.1}% of the f32 time",
                100.0 * f32_rate / pack_rate
            );
        }
    }
}
