use super::*;
use crate::tensor::testing::Owned;

/// The unfused computation in f64, straight from the definition.
#[allow(clippy::too_many_arguments)]
fn reference(
    x: &[f32],
    shape: [usize; 3],
    norm: Option<(&[f32], &[f32])>,
    scale: &[f32],
    shift: &[f32],
    alpha: &[f32],
    eps: f64,
    act: Activation,
) -> Vec<f64> {
    let [bn, cn, ln] = shape;
    let mut out = vec![0.0; x.len()];
    for b in 0..bn {
        for c in 0..cn {
            let row = &x[(b * cn + c) * ln..][..ln];
            let mean = row.iter().map(|v| *v as f64).sum::<f64>() / ln as f64;
            let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / ln as f64;
            for l in 0..ln {
                let mut n = (row[l] as f64 - mean) / (var + eps).sqrt();
                if let Some((w, bias)) = norm {
                    n = n * w[c] as f64 + bias[c] as f64;
                }
                let y = scale[b * cn + c] as f64 * n + shift[b * cn + c] as f64;
                out[(b * cn + c) * ln + l] = match act {
                    Activation::None => y,
                    Activation::LeakyRelu(s) => {
                        if y > 0.0 {
                            y
                        } else {
                            y * s as f64
                        }
                    }
                    Activation::Snake => {
                        let a = alpha[c] as f64;
                        y + (a * y).sin().powi(2) / a
                    }
                };
            }
        }
    }
    out
}

fn data(n: usize, seed: u32, offset: f32, amp: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            offset
                + amp
                    * (((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32
                        / 8_388_608.0
                        - 1.0)
        })
        .collect()
}

struct Case {
    shape: [usize; 3],
    affine: bool,
    act: Activation,
    offset: f32,
}

fn run_case(case: &Case, isa: Isa) -> (Vec<f32>, Vec<f64>) {
    let [b, c, l] = case.shape;
    let xv = data(b * c * l, 1, case.offset, 3.0);
    let wv = data(c, 2, 1.0, 0.5);
    let bv = data(c, 3, 0.0, 0.5);
    let sv = data(b * c, 4, 1.0, 0.8);
    let hv = data(b * c, 5, 0.0, 0.8);
    let av = data(c, 6, 1.5, 1.2)
        .iter()
        .map(|a| if a.abs() < 0.1 { 0.5 } else { *a })
        .collect::<Vec<_>>();
    let want = reference(
        &xv,
        case.shape,
        case.affine.then_some((&wv[..], &bv[..])),
        &sv,
        &hv,
        &av,
        1e-5,
        case.act,
    );
    let mut got = vec![0.0f32; xv.len()];
    if isa == Isa::best() {
        let sh = [b as i64, c as i64, l as i64];
        let mut x = Owned::new(xv.clone(), &sh);
        let mut w = Owned::new(wv.clone(), &[c as i64]);
        let mut bb = Owned::new(bv.clone(), &[c as i64]);
        let mut s = Owned::new(sv.clone(), &[b as i64, c as i64, 1]);
        let mut h = Owned::new(hv.clone(), &[b as i64, c as i64, 1]);
        let mut a = Owned::new(av.clone(), &[1, c as i64, 1]);
        let mut y = Owned::new(vec![0.0f32; xv.len()], &sh);
        let (wv_, bv_) = (w.view(), bb.view());
        let av_ = a.view();
        adain(
            &x.view(),
            case.affine.then_some((&wv_, &bv_)),
            &s.view(),
            &h.view(),
            Some(&av_),
            1e-5,
            case.act,
            &y.view(),
        )
        .unwrap();
        got = y.data;
    } else {
        for (row, (xr, yr)) in xv.chunks(l).zip(got.chunks_mut(l)).enumerate() {
            let ch = row % c;
            let p = RowParams {
                w: if case.affine { wv[ch] } else { 1.0 },
                b: if case.affine { bv[ch] } else { 0.0 },
                scale: sv[row],
                shift: hv[row],
                alpha: av[ch],
                eps: 1e-5,
            };
            run_row(isa, xr, yr, &p, case.act);
        }
    }
    (got, want)
}

#[test]
fn matches_the_f64_reference_on_odd_shapes() {
    let acts = [
        Activation::None,
        Activation::Snake,
        Activation::LeakyRelu(0.2),
    ];
    for isa in Isa::available() {
        for &shape in &[
            [1usize, 1, 1],
            [1, 3, 5],
            [2, 17, 33],
            [1, 128, 1000],
            [3, 5, 16],
            [1, 2, 4097],
        ] {
            for act in acts {
                for affine in [true, false] {
                    // A large offset checks the statistics do not cancel.
                    for offset in [0.0f32, 300.0] {
                        let case = Case {
                            shape,
                            affine,
                            act,
                            offset,
                        };
                        let (got, want) = run_case(&case, isa);
                        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                (*g as f64 - w).abs() <= 2e-6 * w.abs().max(1.0),
                                "{isa:?} {shape:?} {act:?} affine={affine} offset={offset}: [{i}] {g} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn length_one_rows_are_the_shift_and_constant_rows_do_not_divide_by_zero() {
    // var = 0: n = 0 * rsqrt(eps) + b, then the affines; no NaN.
    for isa in Isa::available() {
        let x = [5.0f32; 7];
        let mut y = [0.0f32; 7];
        let p = RowParams {
            w: 2.0,
            b: 0.25,
            scale: 3.0,
            shift: -1.0,
            alpha: 1.0,
            eps: 1e-5,
        };
        run_row(isa, &x[..1], &mut y[..1], &p, Activation::None);
        run_row(isa, &x, &mut y, &p, Activation::None);
        assert!(
            y.iter().all(|v| (*v - (0.25 * 3.0 - 1.0)).abs() < 1e-6),
            "{isa:?}: {y:?}"
        );
        let p0 = RowParams { eps: 0.0, ..p };
        run_row(isa, &x, &mut y, &p0, Activation::None);
        assert!(
            y.iter().all(|v| v.is_nan()),
            "{isa:?}: 0/0 like torch with eps = 0, got {y:?}"
        );
    }
}

#[test]
fn snake_beyond_the_fast_sine_range_is_still_exact() {
    // alpha * y reaches ~2e5: those lanes take the exact slow path.
    for isa in Isa::available() {
        let x: Vec<f32> = (0..40).map(|i| i as f32 - 20.0).collect();
        let mut y = vec![0.0f32; 40];
        let p = RowParams {
            w: 1.0,
            b: 0.0,
            scale: 1.0,
            shift: 0.0,
            alpha: 1.0e5,
            eps: 0.0,
        };
        run_row(isa, &x, &mut y, &p, Activation::Snake);
        // The sine's argument is chaotic at this scale, so take the affine's
        // own float32 outputs (act = none) and check the Snake on them.
        let mut v = vec![0.0f32; 40];
        run_row(isa, &x, &mut v, &p, Activation::None);
        assert!(
            v.iter()
                .filter(|v| (1.0e5 * **v).abs() > crate::sin::FAST_LIMIT)
                .count()
                > 30
        );
        for (v, g) in v.iter().zip(&y) {
            let t = (1.0e5f32 * v) as f64;
            let want = *v as f64 + t.sin().powi(2) / 1.0e5;
            assert!(
                (*g as f64 - want).abs() < 1e-6 * want.abs().max(1.0),
                "{isa:?}: {g} vs {want}"
            );
        }
    }
}

#[test]
fn strided_input_and_nan_propagate() {
    // x[b, c, l] stored as [L, C, B] (a permuted view) plus an offset.
    let (b, c, l) = (2usize, 3usize, 5usize);
    let xv = data(b * c * l, 9, 0.0, 2.0);
    let mut store = vec![-7.0f32];
    store.extend(
        (0..l)
            .flat_map(|li| (0..c).flat_map(move |ci| (0..b).map(move |bi| (bi, ci, li))))
            .map(|(bi, ci, li)| xv[(bi * c + ci) * l + li]),
    );
    let mut x = Owned::strided(
        store,
        &[b as i64, c as i64, l as i64],
        &[1, b as i64, (b * c) as i64],
        4,
    );
    let ones = vec![1.0f32; b * c];
    let zeros = vec![0.0f32; b * c];
    let mut s = Owned::new(ones.clone(), &[b as i64, c as i64, 1]);
    let mut h = Owned::new(zeros.clone(), &[b as i64, c as i64, 1]);
    let mut y = Owned::new(vec![0.0f32; b * c * l], &[b as i64, c as i64, l as i64]);
    adain(
        &x.view(),
        None,
        &s.view(),
        &h.view(),
        None,
        1e-5,
        Activation::LeakyRelu(0.1),
        &y.view(),
    )
    .unwrap();
    let want = reference(
        &xv,
        [b, c, l],
        None,
        &ones,
        &zeros,
        &[],
        1e-5,
        Activation::LeakyRelu(0.1),
    );
    for (g, w) in y.data.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 2e-6, "{g} vs {w}");
    }
    // A NaN poisons its own row only.
    let mut xv2 = xv.clone();
    xv2[l + 2] = f32::NAN;
    let mut x2 = Owned::new(xv2, &[b as i64, c as i64, l as i64]);
    adain(
        &x2.view(),
        None,
        &s.view(),
        &h.view(),
        None,
        1e-5,
        Activation::None,
        &y.view(),
    )
    .unwrap();
    assert!(y.data[l..2 * l].iter().all(|v| v.is_nan()));
    assert!(y.data[..l]
        .iter()
        .chain(&y.data[2 * l..])
        .all(|v| v.is_finite()));
}

fn t<'a>(v: &'a TensorView) -> AnyView<'a> {
    AnyView::from(v)
}

fn call(args: &[AnyView]) -> String {
    adain_packed(args).unwrap_err().message().to_string()
}

#[test]
fn bad_arguments_are_reported_by_name() {
    let mut x = Owned::new(vec![0.0f32; 6], &[1, 2, 3]);
    let mut w = Owned::new(vec![1.0f32; 2], &[2]);
    let mut s = Owned::new(vec![1.0f32; 2], &[1, 2, 1]);
    let mut a0 = Owned::new(vec![0.0f32; 2], &[1, 2, 1]);
    let mut a3 = Owned::new(vec![1.0f32; 3], &[1, 3, 1]);
    let mut y = Owned::new(vec![0.0f32; 6], &[1, 2, 3]);
    let mut yi = Owned::new(vec![0i64; 6], &[1, 2, 3]);
    let (xv, wv, sv, a0v, a3v, yv, yiv) = (
        x.view(),
        w.view(),
        s.view(),
        a0.view(),
        a3.view(),
        y.view(),
        yi.view(),
    );
    let (none, snake, leaky, bad_act, one, two) = (0i64, 1i64, 2i64, 3i64, 1i64, 2i64);
    let (eps, neg, slope) = (1e-5f64, -1.0f64, 0.2f64);
    let m = call(&[
        AnyView::from(&bad_act),
        AnyView::from(&none),
        AnyView::from(&eps),
        AnyView::from(&slope),
    ]);
    assert!(
        m.contains("adain: act: expected a value in [0, 2], got 3"),
        "{m}"
    );
    let m = call(&[
        AnyView::from(&none),
        AnyView::from(&two),
        AnyView::from(&eps),
        AnyView::from(&slope),
    ]);
    assert!(
        m.contains("adain: has_norm_affine: expected 0 or 1, got 2"),
        "{m}"
    );
    let m = call(&[
        AnyView::from(&none),
        AnyView::from(&none),
        AnyView::from(&neg),
        AnyView::from(&slope),
    ]);
    assert!(
        m.contains("adain: eps: expected a finite value >= 0, got -1"),
        "{m}"
    );
    fn four<'a>(act: &'a i64, aff: &'a i64, eps: &'a f64, slope: &'a f64) -> Vec<AnyView<'a>> {
        vec![
            AnyView::from(act),
            AnyView::from(aff),
            AnyView::from(eps),
            AnyView::from(slope),
        ]
    }
    let prims = |act, aff| four(act, aff, &eps, &slope);
    let mut args = prims(&snake, &one);
    args.extend([t(&xv), t(&wv), t(&wv), t(&sv), t(&sv), t(&yv)]);
    assert!(
        call(&args).contains("adain: expected 11 arguments for act=1, has_norm_affine=1, got 10")
    );
    let mut args = prims(&snake, &none);
    args.extend([t(&xv), t(&sv), t(&sv), t(&a3v), t(&yv)]);
    assert!(call(&args).contains("adain: alpha: expected shape [1, 2, 1], got [1, 3, 1]"));
    let mut args = prims(&snake, &none);
    args.extend([t(&xv), t(&sv), t(&sv), t(&a0v), t(&yv)]);
    assert!(call(&args).contains("adain: alpha must be non-zero"));
    let mut args = prims(&leaky, &one);
    args.extend([t(&xv), t(&sv), t(&wv), t(&sv), t(&sv), t(&yv)]);
    assert!(call(&args).contains("adain: norm_w: expected rank 1, got rank 3"));
    let mut args = prims(&none, &none);
    args.extend([t(&xv), t(&wv), t(&sv), t(&yv)]);
    assert!(call(&args).contains("adain: scale: expected rank 3, got rank 1"));
    let mut args = prims(&none, &none);
    args.extend([t(&xv), t(&sv), t(&sv), t(&yiv)]);
    assert!(call(&args).contains("adain: out: expected dtype float32, got int64"));
    let mut args = prims(&none, &none);
    args.extend([t(&xv), t(&sv), t(&sv), t(&xv)]);
    assert!(call(&args).contains("adain: out: output memory overlaps input x"));
    let mut args = prims(&none, &none);
    args.extend([t(&xv), t(&sv), AnyView::from(&one), t(&yv)]);
    assert!(call(&args).contains("adain: shift: expected a tensor"));
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    use crate::tensor::testing::Rng;
    let mut rng = Rng(0xada1_0001);
    for _ in 0..30 {
        let (b, c, l) = (size(&mut rng, 3), 1 + 2 * rng.below(4), size(&mut rng, 40));
        let (act, affine) = (rng.below(3) as i64, rng.below(2) == 1);
        let eps = [1e-5, 0.1][rng.below(2)];
        let slope = 0.2;
        let xv: Vec<f32> = rng.vec(b * c * l).iter().map(|v| 0.5 + 2.0 * v).collect();
        let (nw, nb) = (rng.vec(c), rng.vec(c));
        let (scale, shift) = (rng.vec(b * c), rng.vec(b * c));
        let av: Vec<f32> = rng
            .vec(c)
            .iter()
            .map(|v| v.signum() * (0.2 + v.abs()))
            .collect();
        let activation = match act {
            0 => Activation::None,
            1 => Activation::Snake,
            _ => Activation::LeakyRelu(slope as f32),
        };
        let norm = affine.then_some((&nw[..], &nb[..]));
        let want = reference(&xv, [b, c, l], norm, &scale, &shift, &av, eps, activation)
            .iter()
            .map(|&v| (v, v.abs()))
            .collect();
        let (bi, ci, li) = (b as i64, c as i64, l as i64);
        let mut args = vec![
            ("act", Value::Int(act)),
            ("has_norm_affine", Value::Int(affine as i64)),
            ("eps", Value::Float(eps)),
            ("slope", Value::Float(slope)),
            ("x", Value::Tensor(Spec::input(xv, &[bi, ci, li]))),
        ];
        if affine {
            args.push(("norm_w", Value::Tensor(Spec::derived(nw, &[ci]))));
            args.push(("norm_b", Value::Tensor(Spec::derived(nb, &[ci]))));
        }
        args.push(("scale", Value::Tensor(Spec::derived(scale, &[bi, ci, 1]))));
        args.push(("shift", Value::Tensor(Spec::derived(shift, &[bi, ci, 1]))));
        if act == 1 {
            args.push(("alpha", Value::Tensor(Spec::derived(av, &[1, ci, 1]))));
        }
        args.push(("out", Value::Tensor(Spec::output(&[bi, ci, li]))));
        let mut bad = vec![
            ("act", Value::Int(3)),
            ("has_norm_affine", Value::Int(2)),
            ("eps", Value::Float(-1.0)),
        ];
        if act == 2 {
            bad.push(("slope", Value::Float(f64::NAN)));
        }
        let call = Call {
            global: "kokoro_tvm_ext.adain",
            args,
            want: vec![("out", want)],
            rel: 2e-5,
            bad,
        };
        check(&call, &mut rng);
    }
}
