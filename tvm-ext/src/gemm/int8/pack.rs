//! The activations' quantization (affine, to u8) and the packing of quads
//! (layouts in the module docs of [`super`]).
#[cfg(target_arch = "x86_64")]
use super::isa;
use super::{MR, NR};
#[cfg(target_arch = "x86_64")]
use crate::isa::Isa;
use crate::job::JobError;

/// Whether the AVX-512 loops quantize and pack here: the int8 GEMM runs
/// AVX512-VNNI (or AMX beside it).
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    matches!(isa(), Isa::Avx512Vnni | Isa::AmxInt8)
}

/// Quads along an inner dimension of `k` elements.
pub const fn quads(k: usize) -> usize {
    k.div_ceil(4)
}

/// A f32 scratch buffer seen as `i32`s (same size and alignment, every bit
/// pattern valid for both), so the zero points can use the f32 scratch pool.
pub(crate) fn as_i32(s: &mut [f32]) -> &mut [i32] {
    // SAFETY: f32 and i32 have the same size and alignment, and any bits are a
    // valid i32; the borrow is carried over.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut i32, s.len()) }
}

/// A f32 scratch buffer seen as bytes (the quantized input rows of a tile).
pub(crate) fn as_u8(s: &mut [f32]) -> &mut [u8] {
    // SAFETY: any bits are valid bytes, u8 needs no alignment; the borrow is
    // carried over.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u8, 4 * s.len()) }
}

/// The affine u8 quantization of a block of activations: `x ≈ scale * (q - zero)`,
/// `q = clamp(round_even(x / scale) + zero, 0, 255)`. The range always holds 0,
/// so zero (the convolutions' padding) is exact: it quantizes to `zero`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Affine {
    pub scale: f32,
    /// `1 / scale`, what the quantization multiplies by.
    pub inv: f32,
    pub zero: i32,
}

impl Affine {
    /// The quantization of values in `lo..=hi` onto 0..=255.
    pub fn new(lo: f32, hi: f32) -> Self {
        let (lo, hi) = (lo.min(0.0), hi.max(0.0));
        let scale = (hi - lo) / 255.0;
        if !(scale.is_finite() && scale >= f32::MIN_POSITIVE) {
            // All zero (or not finite, which no scale can hold): any scale will do.
            return Affine {
                scale: 1.0,
                inv: 1.0,
                zero: 0,
            };
        }
        let zero = (-lo / scale).round_ties_even().clamp(0.0, 255.0) as i32;
        Affine {
            scale,
            inv: 1.0 / scale,
            zero,
        }
    }

    /// `x` quantized.
    #[inline]
    pub fn quantize(&self, x: f32) -> u8 {
        // `as` saturates (NaN to 0), then the clamp keeps it in range.
        ((x * self.inv).round_ties_even() as i32 + self.zero).clamp(0, 255) as u8
    }
}

/// The smallest and largest of `v` (`(0, 0)` when empty; NaN ignored).
pub(crate) fn min_max(v: &[f32]) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX512-VNNI implies AVX-512F.
        return unsafe { super::x86::min_max_avx512(v) };
    }
    v.iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Packs quad `q` of `kq` from up to four rows of `n` values each (rows past
/// the end are missing: their bytes are zero) into `dst`, `n` rows (of A,
/// `width` = [`MR`]) or columns (of B, `width` = [`NR`]) in panels of `width`,
/// each value quantized by `quant`.
pub(crate) fn pack_quad(
    rows: [Option<&[f32]>; 4],
    n: usize,
    quant: Affine,
    q: usize,
    kq: usize,
    width: usize,
    dst: &mut [u32],
) -> Result<(), JobError> {
    if q >= kq
        || !(width == MR || width == NR)
        || rows.iter().flatten().any(|r| r.len() < n)
        || dst.len() != n.div_ceil(width) * kq * width
    {
        return Err(JobError::new(format!(
            "pack_quad: quad {q} of {kq}, {n} values, panels of {width}, {} packed elements",
            dst.len()
        )));
    }
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX-512F/BW are present; lengths checked above.
        unsafe { super::x86::pack_quad_avx512(rows, n, quant, q, kq, width, dst) };
        return Ok(());
    }
    for (p, panel) in dst.chunks_exact_mut(kq * width).enumerate() {
        for (c, v) in panel[q * width..(q + 1) * width].iter_mut().enumerate() {
            let j = p * width + c;
            *v = if j < n {
                u32::from_le_bytes(rows.map(|r| r.map_or(0, |r| quant.quantize(r[j]))))
            } else {
                0
            };
        }
    }
    Ok(())
}

/// `src` quantized by `quant` into `dst` (as long).
pub(crate) fn quantize_row(src: &[f32], quant: Affine, dst: &mut [u8]) {
    assert_eq!(src.len(), dst.len(), "quantize_row: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX512-VNNI implies AVX-512F/BW/VL (checked with it); lengths
        // checked above.
        unsafe { super::x86::quantize_row_avx512(src, quant, dst) };
        return;
    }
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = quant.quantize(x);
    }
}

/// Four rows of quantized bytes as one row of quads: `dst[p]` holds
/// `rows[0..4][p]`, the first in its low byte (every row as long as `dst`).
pub(crate) fn interleave_quad(rows: [&[u8]; 4], dst: &mut [u32]) {
    assert!(
        rows.iter().all(|r| r.len() == dst.len()),
        "interleave_quad: lengths differ"
    );
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX-512F/BW/VL are present; lengths checked above.
        unsafe { super::x86::interleave_quad_avx512(rows, dst) };
        return;
    }
    for (p, d) in dst.iter_mut().enumerate() {
        *d = u32::from_le_bytes(rows.map(|r| r[p]));
    }
}
