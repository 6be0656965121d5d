//! Conversions to bf16 and the packed operands of the GEMM (layouts in the
//! module docs of [`super`]).
use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
use super::isa;
use super::{MR, NR};
#[cfg(target_arch = "x86_64")]
use crate::isa::Isa;
use crate::job::JobError;

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

/// The broadcast operand, `rows x k`, in panels of [`MR`] rows of pairs (module docs).
pub(crate) type PackedA<'a> = crate::gemm::packed::PackedA<'a, 2>;
/// The vector operand, `k x cols`, in panels of [`NR`] columns of pairs (module docs).
pub(crate) type PackedB<'a> = crate::gemm::packed::PackedB<'a, 2>;

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
    if matches!(isa(), Isa::Avx512Bf16 | Isa::AmxBf16) {
        // SAFETY: AVX512-BF16 (and so AVX-512F/BW) is present; lengths checked above.
        unsafe { super::x86::pack_pair_native(lo, hi, q, kp, width, dst) };
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
