use super::*;
use crate::gemm::bf16::testing::{assert_close, pack, packed, rounded};
use crate::matmul::matmul_forward;
use crate::precision::Precision;
use crate::tensor::testing::{Owned, Rng};
use tvm_ffi::Any;
use tvm_ffi::AnyView;
use tvm_ffi::Result;

#[test]
fn matmul_bf16_matches_f32_on_rounded_inputs() {
    for &(rows, k, n, has_bias) in &[
        (1usize, 1usize, 1usize, false),
        (1, 128, 1090, true),
        (3, 5, 7, true),
        (33, 17, 65, false),
        (70, 300, 20, true),
        (0, 4, 3, true),
    ] {
        let mut rng = Rng((rows * 31 + k * 7 + n) as u64);
        let (x, w, b) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
        let bias = has_bias.then_some(&b[..]);
        let mut want = vec![0.0f32; rows * n];
        let mut scale = vec![0.0f32; rows * n];
        matmul_forward(rows, k, n, &rounded(&x), &rounded(&w), bias, &mut want).unwrap();
        let abs = |v: &[f32]| rounded(v).iter().map(|v| v.abs()).collect::<Vec<_>>();
        matmul_forward(rows, k, n, &abs(&x), &abs(&w), None, &mut scale).unwrap();
        let mut wp = pack("matmul", 1, &w, &[k as i64, n as i64]);
        let mut xt = Owned::new(x.clone(), &[rows as i64, k as i64]);
        let mut bt = Owned::new(b.clone(), &[n as i64]);
        let mut ot = Owned::new(vec![f32::NAN; rows * n], &[rows as i64, n as i64]);
        let flag = has_bias as i64;
        let mut views = vec![xt.view(), wp.view()];
        if has_bias {
            views.push(bt.view());
        }
        views.push(ot.view());
        let mut args = vec![AnyView::from(&flag)];
        args.extend(views.iter().map(AnyView::from));
        matmul_function()
            .call_packed(&args)
            .unwrap_or_else(|e| panic!("{}", e.message()));
        drop(args);
        drop(views);
        let tol = if Bf16Gemm::native() { 1.0 } else { 500.0 };
        let loose: Vec<f32> = scale.iter().map(|s| s * tol).collect();
        assert_close(&format!("{rows}x{k}x{n}"), &ot.data, &want, &loose);
    }
}

#[test]
fn matmul_bf16_rejects_weights_packed_for_another_n() {
    let err = |r: Result<Any>| match r {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e.message().to_string(),
    };
    // matmul_bf16: weights packed for another N.
    let mut wm = pack("matmul", 1, &[0.5; 12], &[3, 4]);
    let mut xm = Owned::new(vec![0.5f32; 6], &[2, 3]);
    let mut om = Owned::new(vec![0.0f32; 80], &[2, 40]);
    let zero = 0i64;
    let views = [xm.view(), wm.view(), om.view()];
    let mut args = vec![AnyView::from(&zero)];
    args.extend(views.iter().map(AnyView::from));
    let m = err(matmul_function().call_packed(&args));
    assert!(
        m.contains("matmul_bf16: w: expected shape [1, 2, 2, 32, 2], got [1, 1, 2, 32, 2]"),
        "{m}"
    );
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::gemm::testing::reference_matmul;
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    let mut rng = Rng(0xbf16_0002);
    // Where bf16 is not native the inputs stay f32.
    let x_in = |v: Vec<f32>| if Bf16Gemm::native() { rounded(&v) } else { v };
    for _ in 0..12 {
        let i = |v: usize| v as i64;
        let (rows, k, n) = (size(&mut rng, 5), 1 + rng.below(9), 1 + rng.below(40));
        let has_bias = rng.below(2) == 1;
        let (x, w, bias) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
        let (xr, wr) = (x_in(x.clone()), rounded(&w));
        let want = reference_matmul((rows, k, n), &xr, &wr, has_bias.then_some(&bias[..]));
        let wp = packed(&mut rng, "matmul", 1, &w, &[i(k), i(n)]);
        let mut args = vec![
            ("has_bias", Value::Int(has_bias as i64)),
            (
                "x",
                Value::Tensor(Spec::input(x, &[i(rows), i(k)]).any_rank()),
            ),
            ("w", Value::Tensor(wp)),
        ];
        if has_bias {
            args.push(("bias", Value::Tensor(Spec::derived(bias, &[i(n)]))));
        }
        args.push((
            "out",
            Value::Tensor(Spec::output(&[i(rows), i(n)]).deciding()),
        ));
        let call = Call {
            global: "kokoro_tvm_ext.matmul_bf16",
            args,
            want: vec![("out", want)],
            rel: 2e-5,
            bad: vec![("has_bias", Value::Int(2))],
        };
        check(&call, &mut rng);
    }
}
