use super::*;
use crate::tensor::testing::Owned;

fn reference(x: &[f32], alpha: &[f32], channels: usize, length: usize) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let a = alpha[(i / length) % channels] as f64;
            let v = v as f64;
            (v + (a * v).sin().powi(2) / a) as f32
        })
        .collect()
}

#[test]
fn matches_reference_on_odd_shapes() {
    for &(b, c, l) in &[(1usize, 1usize, 1usize), (2, 3, 17), (1, 5, 1), (3, 2, 0)] {
        let xv: Vec<f32> = (0..b * c * l)
            .map(|i| (i as f32 * 0.37).sin() * 3.0)
            .collect();
        let av: Vec<f32> = (0..c).map(|i| 0.5 + i as f32 * 0.25).collect();
        let shape = [b as i64, c as i64, l as i64];
        let mut x = Owned::new(xv.clone(), &shape);
        let mut a = Owned::new(av.clone(), &[1, c as i64, 1]);
        let mut y = Owned::new(vec![0.0f32; b * c * l], &shape);
        snake(&x.view(), &a.view(), &y.view()).unwrap();
        let want = reference(&xv, &av, c, l);
        for (got, want) in y.data.iter().zip(&want) {
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn an_output_sharing_memory_with_an_input_is_refused() {
    let mut x = Owned::new(vec![0.5f32; 6], &[1, 2, 3]);
    let mut a = Owned::new(vec![1.0f32; 2], &[1, 2, 1]);
    let (xv, av) = (x.view(), a.view());
    // Computing in place would read elements it already wrote.
    let err = snake(&xv, &av, &xv).unwrap_err();
    assert!(
        err.message()
            .contains("snake: out: output memory overlaps input x"),
        "{}",
        err.message()
    );
    let args = [AnyView::from(&xv), AnyView::from(&av)];
    let err = function()
        .call_packed(&args)
        .err()
        .expect("two arguments are refused");
    assert!(
        err.message()
            .contains("snake: expected 3 arguments (x, alpha, out), got 2"),
        "{}",
        err.message()
    );
}

#[test]
fn channel_mismatch_is_reported() {
    let mut x = Owned::new(vec![0.0f32; 6], &[1, 2, 3]);
    let mut a = Owned::new(vec![1.0f32; 3], &[1, 3, 1]);
    let mut y = Owned::new(vec![0.0f32; 6], &[1, 2, 3]);
    let err = snake(&x.view(), &a.view(), &y.view()).unwrap_err();
    assert!(err
        .message()
        .contains("snake: alpha: expected shape [1, 2, 1], got [1, 3, 1]"));
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    use crate::tensor::testing::Rng;
    let mut rng = Rng(0x5ae_0001);
    for _ in 0..30 {
        let (b, c, l) = (size(&mut rng, 3), 1 + 2 * rng.below(4), size(&mut rng, 40));
        let xv: Vec<f32> = rng.vec(b * c * l).iter().map(|v| v * 4.0).collect();
        // Non-zero, either sign.
        let av: Vec<f32> = rng
            .vec(c)
            .iter()
            .map(|v| v.signum() * (0.2 + v.abs()))
            .collect();
        let want = reference(&xv, &av, c, l)
            .iter()
            .map(|&v| (v as f64, v.abs() as f64))
            .collect();
        let shape = [b as i64, c as i64, l as i64];
        let call = Call {
            global: "kokoro_tvm_ext.snake",
            args: vec![
                ("x", Value::Tensor(Spec::input(xv, &shape))),
                ("alpha", Value::Tensor(Spec::derived(av, &[1, c as i64, 1]))),
                ("out", Value::Tensor(Spec::output(&shape))),
            ],
            want: vec![("out", want)],
            rel: 2e-6,
            bad: vec![],
        };
        check(&call, &mut rng);
    }
}

#[test]
fn zero_alpha_is_refused() {
    let mut x = Owned::new(vec![0.0f32; 2], &[1, 1, 2]);
    let mut a = Owned::new(vec![0.0f32], &[1, 1, 1]);
    let mut y = Owned::new(vec![0.0f32; 2], &[1, 1, 2]);
    let err = snake(&x.view(), &a.view(), &y.view()).unwrap_err();
    assert!(err.message().contains("non-zero"));
}
