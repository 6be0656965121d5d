//! What the tests of the int8 kernels share: packing through the registered
//! packer (as the compiler does) and the quantization error bound.
use tvm_ffi::{AnyView, Tensor};

use super::pack_function;
use crate::tensor::testing::Owned;

/// Packs `w` through the registered packer, as the compiler does.
pub fn pack(kind: &str, groups: i64, w: &[f32], shape: &[i64]) -> Owned<i8> {
    let mut wt = Owned::new(w.to_vec(), shape);
    let kind = tvm_ffi::String::from(kind);
    let view = wt.view();
    let args = [
        AnyView::from(&kind),
        AnyView::from(&groups),
        AnyView::from(&view),
    ];
    let t: Tensor = pack_function()
        .call_packed(&args)
        .unwrap_or_else(|e| panic!("{}", e.message()))
        .try_into()
        .unwrap();
    let data = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const i8, t.numel()) }.to_vec();
    Owned::new(data, t.shape())
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
