//! The softmax's x86-64 code: its row compiled for AVX-512 and for AVX2 (LLVM
//! vectorizes the portable loop for each).
use super::row;

#[target_feature(enable = "avx512f")]
pub(super) unsafe fn row_avx512(x: &[f32], y: &mut [f32]) {
    row(x, y)
}

#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn row_avx2(x: &[f32], y: &mut [f32]) {
    row(x, y)
}
