//! What the tests of the bf16 kernels share: bf16 rounding, packing through
//! the registered packer (as the compiler does), and their tolerance.
use super::{pack_function, round_bf16};
use crate::gemm::testing::packed_with;
use crate::tensor::fuzz::{call_returning, check, elements, Call, Data, Spec, Value};
use crate::tensor::testing::{Owned, Rng};
use crate::tensor::Bf16;

pub fn rounded(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| round_bf16(x)).collect()
}

/// Packs `w` through the registered packer, as the compiler does.
pub fn pack(kind: &str, groups: i64, w: &[f32], shape: &[i64]) -> Owned<Bf16> {
    packed_with(pack_function(), kind, groups, w, shape)
}

/// The f32 kernels on bf16-rounded x and w: what the bf16 kernels compute,
/// up to the order of the f32 additions.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], scale: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
        let tol = 2e-5 * (1.0 + s);
        assert!(
            (g - w).abs() <= tol,
            "{what}: [{i}] got {g}, want {w} (tol {tol})"
        );
    }
}

/// `w` rounded to bf16 and packed through the registry from a random layout,
/// after the packer's own mutations.
pub fn packed(rng: &mut Rng, kind: &'static str, groups: usize, w: &[f32], shape: &[i64]) -> Spec {
    let args = vec![
        ("kind", Value::Str(kind)),
        ("groups", Value::Int(groups as i64)),
        ("w", Value::Tensor(Spec::input(w.to_vec(), shape))),
    ];
    let t = call_returning("kokoro_tvm_ext.pack_bf16", &args, rng).unwrap();
    let call = Call {
        global: "kokoro_tvm_ext.pack_bf16",
        args,
        want: vec![],
        rel: 0.0,
        bad: vec![("kind", Value::Str("conv2d")), ("groups", Value::Int(0))],
    };
    check(&call, rng);
    let data = elements::<Bf16>(&t);
    Spec::derived(vec![0.0; data.len()], t.shape()).with_data(Data::Bf16(data))
}
