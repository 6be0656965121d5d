//! The softmax's aarch64 code. NEON is aarch64's baseline, so this is the
//! portable build's code: the wrapper keeps the table whole, one arm per
//! instruction set.
use super::row;

#[target_feature(enable = "neon")]
pub(super) unsafe fn row_neon(x: &[f32], y: &mut [f32]) {
    row(x, y)
}
