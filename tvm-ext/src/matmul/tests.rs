use super::testing::data;
use super::*;
use crate::gemm::testing::reference_matmul;
use crate::tensor::testing::{assert_close_to, Owned};
use tvm_ffi::{Any, TensorView, TYPE_ERROR};

fn args_of<'a>(flag: &'a i64, views: &'a [TensorView]) -> Vec<AnyView<'a>> {
    let mut args = vec![AnyView::from(flag)];
    args.extend(views.iter().map(AnyView::from));
    args
}

/// Runs the packed function on `x` (shape `xs`, optionally stored transposed
/// in its last two dims) and checks against an f64 reference.
fn check(xs: &[i64], n: usize, has_bias: bool, transposed_x: bool) {
    let k = *xs.last().unwrap() as usize;
    let rows: usize = xs[..xs.len() - 1].iter().map(|&d| d as usize).product();
    let x = data(rows * k, 1);
    let w = data(k * n, 2);
    let b = data(n, 3);
    let mut xt = if transposed_x {
        // Rank 2 only: store x^T and view it with swapped strides.
        let r = rows;
        let mut st = vec![0.0f32; r * k];
        for i in 0..r {
            for j in 0..k {
                st[j * r + i] = x[i * k + j];
            }
        }
        Owned::strided(st, xs, &[1, r as i64], 0)
    } else {
        Owned::new(x.clone(), xs)
    };
    let mut wt = Owned::new(w.clone(), &[k as i64, n as i64]);
    let mut bt = Owned::new(b.clone(), &[n as i64]);
    let mut os = xs.to_vec();
    *os.last_mut().unwrap() = n as i64;
    let mut ot = Owned::new(vec![f32::NAN; rows * n], &os);
    let mut views = vec![xt.view(), wt.view()];
    if has_bias {
        views.push(bt.view());
    }
    views.push(ot.view());
    let flag = has_bias as i64;
    function()
        .call_packed(&args_of(&flag, &views))
        .unwrap_or_else(|e| panic!("{xs:?} n={n}: {}", e.message()));
    drop(views);
    let want = reference_matmul((rows, k, n), &x, &w, has_bias.then_some(&b[..]));
    let what = format!("{xs:?} n={n} bias={has_bias}");
    assert_close_to(&what, &ot.data, &want, 1e-4);
}

#[test]
fn matches_reference() {
    check(&[1, 1], 1, false, false);
    check(&[1, 1], 1, true, false);
    check(&[3, 5, 7], 9, true, false);
    check(&[2, 3, 17], 33, false, false);
    check(&[1, 64], 130, true, false);
    check(&[70, 300], 20, true, false);
    check(&[130, 96], 47, false, false);
    check(&[19], 5, true, false);
    check(&[0, 4], 3, true, false);
    check(&[2, 0], 3, true, false);
    check(&[23, 31], 17, true, true);
}

fn err_of(r: Result<Any>) -> tvm_ffi::Error {
    match r {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e,
    }
}

fn fails(shapes: &[&[i64]], has_bias: i64, kind: tvm_ffi::ErrorKind, want: &str) {
    let mut ts: Vec<Owned<f32>> = shapes
        .iter()
        .map(|s| Owned::new(vec![0.25; s.iter().product::<i64>() as usize], s))
        .collect();
    let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
    match function().call_packed(&args_of(&has_bias, &views)) {
        Ok(_) => panic!("expected failure {want:?}"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{}", e.message());
            assert!(
                e.message().contains(want),
                "{:?} lacks {want:?}",
                e.message()
            );
        }
    }
}

#[test]
fn rejects_bad_arguments() {
    fails(
        &[&[2, 3], &[3, 4], &[2, 4]],
        2,
        VALUE_ERROR,
        "matmul: has_bias: expected 0 or 1, got 2",
    );
    fails(
        &[&[2, 3], &[3, 4], &[2, 4]],
        1,
        VALUE_ERROR,
        "matmul: expected 5 arguments for has_bias=1, got 4",
    );
    fails(
        &[&[2, 3], &[3, 4], &[4], &[2, 4]],
        0,
        VALUE_ERROR,
        "matmul: expected 4 arguments for has_bias=0, got 5",
    );
    fails(
        &[&[2, 3], &[3, 4, 1], &[2, 4]],
        0,
        VALUE_ERROR,
        "matmul: w: expected rank 2, got rank 3",
    );
    fails(
        &[&[2, 3], &[5, 4], &[2, 4]],
        0,
        VALUE_ERROR,
        "matmul: w: expected shape [3, 4], got [5, 4]",
    );
    fails(
        &[&[2, 3], &[3, 4], &[3], &[2, 4]],
        1,
        VALUE_ERROR,
        "matmul: bias: expected shape [4], got [3]",
    );
    fails(
        &[&[2, 3], &[3, 4], &[2, 5]],
        0,
        VALUE_ERROR,
        "matmul: out: expected shape [2, 4], got [2, 5]",
    );
    fails(
        &[&[2, 2, 3], &[3, 4], &[4, 4]],
        0,
        VALUE_ERROR,
        "matmul: out: expected rank 3, got rank 2 with shape [4, 4]",
    );
    fails(
        &[&[], &[3, 4], &[4]],
        0,
        VALUE_ERROR,
        "matmul: x: expected rank >= 1, got rank 0",
    );
    let r = function().call_packed(&[]);
    assert!(err_of(r)
        .message()
        .contains("matmul: expected at least 1 argument"));

    // dtype, non-tensor, strided and aliasing outputs.
    let mut x = Owned::new(vec![1i64; 6], &[2, 3]);
    let mut w = Owned::new(vec![0.5f32; 12], &[3, 4]);
    let mut o = Owned::new(vec![0.0f32; 8], &[2, 4]);
    let views = [x.view(), w.view(), o.view()];
    let zero = 0i64;
    let err = err_of(function().call_packed(&args_of(&zero, &views)));
    assert_eq!(err.kind(), TYPE_ERROR);
    assert!(
        err.message()
            .contains("matmul: x: expected dtype float32, got int64"),
        "{}",
        err.message()
    );
    let mut args = args_of(&zero, &views);
    args[2] = AnyView::from(&zero);
    let err = err_of(function().call_packed(&args));
    assert!(
        err.message().contains("matmul: w: expected a tensor"),
        "{}",
        err.message()
    );
    let mut x = Owned::new(vec![0.5f32; 6], &[2, 3]);
    let mut so = Owned::strided(vec![0.0f32; 8], &[2, 4], &[1, 2], 0);
    let views = [x.view(), w.view(), so.view()];
    let err = err_of(function().call_packed(&args_of(&zero, &views)));
    assert!(
        err.message()
            .contains("matmul: out: output tensors must be contiguous"),
        "{}",
        err.message()
    );
    let mut sq = Owned::new(vec![0.5f32; 9], &[3, 3]);
    let mut w3 = Owned::new(vec![0.5f32; 9], &[3, 3]);
    let v = sq.view();
    let views = [v, w3.view(), sq.view()];
    let err = err_of(function().call_packed(&args_of(&zero, &views)));
    assert!(
        err.message()
            .contains("matmul: out: output memory overlaps input x"),
        "{}",
        err.message()
    );
}

/// `cargo test --release -p tvm-ext bench_matmul -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_matmul() {
    for &(r, k, n) in &[
        (510usize, 768usize, 3072usize),
        (510, 3072, 768),
        (510, 768, 768),
        (510, 128, 768),
        (64, 512, 512),
    ] {
        let (x, w, b) = (data(r * k, 1), data(k * n, 2), data(n, 3));
        let mut out = vec![0.0f32; r * n];
        let flops = 2.0 * (r * k * n) as f64;
        let reps = ((1e10 / flops) as usize).clamp(3, 500);
        matmul_forward(r, k, n, &x, &w, Some(&b), &mut out).unwrap();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                matmul_forward(r, k, n, &x, &w, Some(&b), &mut out).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "matmul {r}x{k}x{n}: {:.3} ms {:.1} GFLOP/s",
            best * 1e3,
            flops / best / 1e9
        );
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    use crate::tensor::testing::Rng;
    let mut rng = Rng(0x3a7_0001);
    for _ in 0..40 {
        let lead: Vec<usize> = (0..rng.below(3)).map(|_| size(&mut rng, 3)).collect();
        let (k, n) = (size(&mut rng, 9), size(&mut rng, 9));
        let rows: usize = lead.iter().product();
        let has_bias = rng.below(2) == 1;
        let (x, w, bias) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
        let want = reference_matmul((rows, k, n), &x, &w, has_bias.then_some(&bias[..]));
        let shape =
            |last: usize| -> Vec<i64> { lead.iter().chain([&last]).map(|&d| d as i64).collect() };
        let mut args = vec![
            ("has_bias", Value::Int(has_bias as i64)),
            ("x", Value::Tensor(Spec::input(x, &shape(k)).any_rank())),
            ("w", Value::Tensor(Spec::input(w, &[k as i64, n as i64]))),
        ];
        if has_bias {
            args.push(("bias", Value::Tensor(Spec::derived(bias, &[n as i64]))));
        }
        args.push(("out", Value::Tensor(Spec::output(&shape(n)))));
        let call = Call {
            global: "kokoro_tvm_ext.matmul",
            args,
            want: vec![("out", want)],
            rel: 1e-5,
            bad: vec![("has_bias", Value::Int(2))],
        };
        check(&call, &mut rng);
    }
}
