//! The x86-64 code both packed GEMMs' packers share (bf16 pairs, int8 quads):
//! the AVX-512 store they end with.
use std::arch::x86_64::*;

/// Columns `j..j + 16` of word row `q` (of `kq`: quads or pairs, as 16
/// words) into their panels of `width` (8 or 32: two halves of 8, each inside
/// one panel).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn store_halves(
    word: __m512i,
    j: usize,
    padded: usize,
    q: usize,
    kq: usize,
    width: usize,
    dst: &mut [u32],
) {
    for (half, v) in [
        _mm512_castsi512_si256(word),
        _mm512_extracti64x4_epi64::<1>(word),
    ]
    .into_iter()
    .enumerate()
    {
        let jj = j + 8 * half;
        if jj < padded {
            let at = ((jj / width) * kq + q) * width + jj % width;
            _mm256_storeu_si256(dst.as_mut_ptr().add(at) as *mut __m256i, v);
        }
    }
}
