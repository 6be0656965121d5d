//! What the tests of the int8 kernels share: packing through the registered
//! packer (as the compiler does) and the quantization error bound.
use super::pack_function;
use crate::gemm::testing::packed_with;
use crate::tensor::testing::Owned;

/// Packs `w` through the registered packer, as the compiler does.
pub fn pack(kind: &str, groups: i64, w: &[f32], shape: &[i64]) -> Owned<i8> {
    packed_with(pack_function(), kind, groups, w, shape)
}

/// The largest |v|.
pub fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// Asserts `|got - want| <= bound` per element, where the bound holds the
/// quantization error (`bound` per output, from the caller) and f32 rounding.
pub fn assert_within(what: &str, got: &[f32], want: &[(f64, f64)], bound: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, ((g, (v, mag)), b)) in got.iter().zip(want).zip(bound).enumerate() {
        let tol = b * 1.001 + 1e-5 * (1.0 + mag);
        assert!(
            (*g as f64 - v).abs() <= tol,
            "{what}: element {i}: got {g}, want {v} (tol {tol})"
        );
    }
}
