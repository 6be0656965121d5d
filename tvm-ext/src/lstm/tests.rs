use super::*;
use crate::tensor::testing::Owned;
use tvm_ffi::{TensorView, TYPE_ERROR};

// ---- data ---------------------------------------------------------------

struct Rng(u64);

impl Rng {
    /// Uniform in [-scale, scale).
    fn next(&mut self, scale: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }

    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next(scale)).collect()
    }
}

#[derive(Clone, Debug)]
struct Case {
    layers: usize,
    bidir: bool,
    batch_first: bool,
    b: usize,
    t: usize,
    i: usize,
    h: usize,
    lengths: Option<Vec<i64>>,
    state: bool,
    biases: bool,
    strided_x: bool,
}

impl Case {
    fn new(
        layers: usize,
        bidir: bool,
        batch_first: bool,
        b: usize,
        t: usize,
        i: usize,
        h: usize,
    ) -> Self {
        Case {
            layers,
            bidir,
            batch_first,
            b,
            t,
            i,
            h,
            lengths: None,
            state: false,
            biases: true,
            strided_x: false,
        }
    }

    fn cfg(&self) -> LstmConfig {
        LstmConfig {
            num_layers: self.layers,
            bidirectional: self.bidir,
            batch_first: self.batch_first,
            batch: self.b,
            seq_len: self.t,
            input_size: self.i,
            hidden_size: self.h,
        }
    }
}

struct Data {
    x: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
    /// Per (layer, direction): w_ih, w_hh, b_ih, b_hh.
    params: Vec<[Vec<f32>; 4]>,
}

fn make_data(case: &Case, seed: u64) -> Data {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    let cfg = case.cfg();
    let d = cfg.directions();
    let scale = 1.0 / (case.h as f32).sqrt();
    let x = rng.vec(case.b * case.t * case.i, 1.0);
    let h0 = rng.vec(case.layers * d * case.b * case.h, 0.5);
    let c0 = rng.vec(case.layers * d * case.b * case.h, 0.5);
    let params = (0..case.layers * d)
        .map(|k| {
            let in_l = cfg.layer_input_size(k / d);
            [
                rng.vec(4 * case.h * in_l, scale),
                rng.vec(4 * case.h * case.h, scale),
                rng.vec(4 * case.h, scale),
                rng.vec(4 * case.h, scale),
            ]
        })
        .collect();
    Data { x, h0, c0, params }
}

fn weights<'a>(case: &Case, data: &'a Data) -> Vec<LayerDirWeights<'a>> {
    data.params
        .iter()
        .map(|[w_ih, w_hh, b_ih, b_hh]| LayerDirWeights {
            w_ih,
            w_hh,
            b_ih: case.biases.then_some(&b_ih[..]),
            b_hh: case.biases.then_some(&b_hh[..]),
        })
        .collect()
}

// ---- the f64 reference ----------------------------------------------------

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Straight loops with torch's packed-sequence semantics. Returns y in the
/// case's layout, h_n and c_n.
fn reference(case: &Case, data: &Data) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (b_n, t_n, h_n_) = (case.b, case.t, case.h);
    let d_n = if case.bidir { 2 } else { 1 };
    let lens: Vec<usize> = match &case.lengths {
        Some(l) => l.iter().map(|&v| v as usize).collect(),
        None => vec![t_n; b_n],
    };
    let xrow = |b: usize, t: usize| {
        if case.batch_first {
            b * t_n + t
        } else {
            t * b_n + b
        }
    };
    // Batch-major layer input [b][t][feature].
    let mut inp: Vec<Vec<Vec<f64>>> = (0..b_n)
        .map(|b| {
            (0..t_n)
                .map(|t| {
                    data.x[xrow(b, t) * case.i..][..case.i]
                        .iter()
                        .map(|&v| v as f64)
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut hn = vec![0.0f64; case.layers * d_n * b_n * h_n_];
    let mut cn = hn.clone();
    for l in 0..case.layers {
        let mut out = vec![vec![vec![0.0f64; d_n * h_n_]; t_n]; b_n];
        for d in 0..d_n {
            let [w_ih, w_hh, b_ih, b_hh] = &data.params[l * d_n + d];
            let in_l = inp[0][0].len();
            for b in 0..b_n {
                let s = ((l * d_n + d) * b_n + b) * h_n_;
                let (mut h, mut c) = if case.state {
                    (
                        data.h0[s..s + h_n_]
                            .iter()
                            .map(|&v| v as f64)
                            .collect::<Vec<_>>(),
                        data.c0[s..s + h_n_]
                            .iter()
                            .map(|&v| v as f64)
                            .collect::<Vec<_>>(),
                    )
                } else {
                    (vec![0.0; h_n_], vec![0.0; h_n_])
                };
                let steps: Vec<usize> = if d == 0 {
                    (0..lens[b]).collect()
                } else {
                    (0..lens[b]).rev().collect()
                };
                for t in steps {
                    let mut gates = vec![0.0f64; 4 * h_n_];
                    for (r, gate) in gates.iter_mut().enumerate() {
                        let mut acc = if case.biases {
                            b_ih[r] as f64 + b_hh[r] as f64
                        } else {
                            0.0
                        };
                        for k in 0..in_l {
                            acc += w_ih[r * in_l + k] as f64 * inp[b][t][k];
                        }
                        for k in 0..h_n_ {
                            acc += w_hh[r * h_n_ + k] as f64 * h[k];
                        }
                        *gate = acc;
                    }
                    for j in 0..h_n_ {
                        let i = sig(gates[j]);
                        let f = sig(gates[h_n_ + j]);
                        let g = gates[2 * h_n_ + j].tanh();
                        let o = sig(gates[3 * h_n_ + j]);
                        c[j] = f * c[j] + i * g;
                        h[j] = o * c[j].tanh();
                    }
                    out[b][t][d * h_n_..(d + 1) * h_n_].copy_from_slice(&h);
                }
                hn[s..s + h_n_].copy_from_slice(&h);
                cn[s..s + h_n_].copy_from_slice(&c);
            }
        }
        inp = out;
    }
    let dh = d_n * h_n_;
    let mut y = vec![0.0f64; b_n * t_n * dh];
    for b in 0..b_n {
        for t in 0..t_n {
            y[xrow(b, t) * dh..][..dh].copy_from_slice(&inp[b][t]);
        }
    }
    (y, hn, cn)
}

// ---- running a case -------------------------------------------------------

fn max_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs())
        .fold(0.0, f64::max)
}

fn check_padding_is_zero(case: &Case, y: &[f32]) {
    let Some(lens) = &case.lengths else { return };
    let dh = case.h * if case.bidir { 2 } else { 1 };
    for (b, &len) in lens.iter().enumerate() {
        for t in len as usize..case.t {
            let r = if case.batch_first {
                b * case.t + t
            } else {
                t * case.b + b
            };
            assert!(
                y[r * dh..(r + 1) * dh].iter().all(|&v| v == 0.0),
                "{case:?}: y[b={b}, t={t}] is not zero"
            );
        }
    }
}

/// Through the registered packed function, with every ISA through the plain
/// Rust entry point, against the reference.
fn check(case: &Case) {
    let data = make_data(case, case.t as u64 * 31 + case.b as u64);
    let (want_y, want_hn, want_cn) = reference(case, &data);
    let cfg = case.cfg();
    let d = cfg.directions();
    let ny = case.b * case.t * d * case.h;
    let ns = case.layers * d * case.b * case.h;

    // Packed call, through a `Function` as TVM would make it.
    let (y, hn, cn) = {
        let xs = if case.batch_first {
            [case.b, case.t, case.i]
        } else {
            [case.t, case.b, case.i]
        };
        let xs = xs.map(|v| v as i64);
        let mut x = if case.strided_x {
            // Same logical tensor with the last axis stored in reverse order
            // inside a buffer twice as wide, one element in.
            let (a0, a1, a2) = (xs[0] as usize, xs[1] as usize, xs[2] as usize);
            let mut buf = vec![f32::NAN; 1 + a0 * a1 * 2 * a2];
            for p in 0..a0 * a1 {
                for k in 0..a2 {
                    buf[1 + p * 2 * a2 + (a2 - 1 - k)] = data.x[p * a2 + k];
                }
            }
            let strides = [(a1 * 2 * a2) as i64, (2 * a2) as i64, -1];
            Owned::strided(buf, &xs, &strides, 4 * a2 as u64)
        } else {
            Owned::new(data.x.clone(), &xs)
        };
        let sshape = [(case.layers * d) as i64, case.b as i64, case.h as i64];
        let mut lengths = case
            .lengths
            .clone()
            .map(|l| Owned::new(l, &[case.b as i64]));
        let mut h0 = Owned::new(data.h0.clone(), &sshape);
        let mut c0 = Owned::new(data.c0.clone(), &sshape);
        let mut params: Vec<Owned<f32>> = Vec::new();
        for (k, [w_ih, w_hh, b_ih, b_hh]) in data.params.iter().enumerate() {
            let g4 = 4 * case.h as i64;
            params.push(Owned::new(
                w_ih.clone(),
                &[g4, cfg.layer_input_size(k / d) as i64],
            ));
            params.push(Owned::new(w_hh.clone(), &[g4, case.h as i64]));
            if case.biases {
                params.push(Owned::new(b_ih.clone(), &[g4]));
                params.push(Owned::new(b_hh.clone(), &[g4]));
            }
        }
        let ys = if case.batch_first {
            [case.b, case.t, d * case.h]
        } else {
            [case.t, case.b, d * case.h]
        };
        let mut y = Owned::new(vec![f32::NAN; ny], &ys.map(|v| v as i64));
        let mut hn = Owned::new(vec![f32::NAN; ns], &sshape);
        let mut cn = Owned::new(vec![f32::NAN; ns], &sshape);

        let ints: Vec<i64> = vec![
            case.layers as i64,
            case.bidir as i64,
            case.batch_first as i64,
            case.biases as i64,
            case.lengths.is_some() as i64,
            case.state as i64,
        ];
        let mut views: Vec<TensorView> = vec![x.view()];
        if let Some(l) = &mut lengths {
            views.push(l.view());
        }
        if case.state {
            views.push(h0.view());
            views.push(c0.view());
        }
        for p in &mut params {
            views.push(p.view());
        }
        views.push(y.view());
        views.push(hn.view());
        views.push(cn.view());
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        function()
            .call_packed(&args)
            .unwrap_or_else(|e| panic!("{case:?}: {}", e.message()));
        (y.data, hn.data, cn.data)
    };
    let tol = 1e-5;
    let errs = [
        max_err(&y, &want_y),
        max_err(&hn, &want_hn),
        max_err(&cn, &want_cn),
    ];
    assert!(
        errs.iter().all(|&e| e < tol),
        "{case:?}: packed max errors y/h_n/c_n {errs:?}"
    );
    check_padding_is_zero(case, &y);

    // Every instruction set through the plain entry point.
    let w = weights(case, &data);
    let lens = case.lengths.as_deref();
    let state = case.state.then_some((&data.h0[..], &data.c0[..]));
    for isa in Isa::available() {
        let mut y = vec![f32::NAN; ny];
        let mut hn = vec![f32::NAN; ns];
        let mut cn = vec![f32::NAN; ns];
        forward_with(
            isa, &cfg, &data.x, lens, state, &w, &mut y, &mut hn, &mut cn,
        )
        .unwrap();
        let errs = [
            max_err(&y, &want_y),
            max_err(&hn, &want_hn),
            max_err(&cn, &want_cn),
        ];
        assert!(
            errs.iter().all(|&e| e < tol),
            "{case:?} {isa:?}: max errors y/h_n/c_n {errs:?}"
        );
        check_padding_is_zero(case, &y);
    }
}

// ---- accuracy ---------------------------------------------------------------

#[test]
fn activations_are_within_1e_6_of_f64() {
    let mut worst = (0.0f64, 0.0f64);
    let mut x = -60.0f32;
    while x <= 60.0 {
        let xd = x as f64;
        let es = (sigmoid(x) as f64 - sig(xd)).abs();
        let et = (tanh(x) as f64 - xd.tanh()).abs();
        worst = (worst.0.max(es), worst.1.max(et));
        x += 0.000_37;
    }
    assert!(
        worst.0 < 1e-6 && worst.1 < 1e-6,
        "sigmoid/tanh max abs error {worst:?}"
    );
    for v in [
        0.0f32,
        1e-30,
        -1e-30,
        1e-7,
        f32::MIN_POSITIVE,
        1e30,
        -1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ] {
        assert!(
            (sigmoid(v) as f64 - sig(v as f64)).abs() < 1e-6,
            "sigmoid({v})"
        );
        assert!(
            (tanh(v) as f64 - (v as f64).tanh()).abs() < 1e-6,
            "tanh({v})"
        );
    }
    assert!(sigmoid(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
}

#[test]
fn packing_agrees_across_instruction_sets() {
    for hidden in [1usize, 3, 8, 9, 16, 17, 24] {
        let gp = (4 * hidden).div_ceil(NB) * NB;
        let w = Rng(hidden as u64 + 1).vec(4 * hidden * hidden, 1.0);
        for isa in Isa::available() {
            let packed = pack_recurrent(isa, &w, hidden, gp);
            for p in 0..gp / NB {
                for k in 0..hidden {
                    for c in 0..NB {
                        let r = p * NB + c;
                        let want = if r < 4 * hidden {
                            w[r * hidden + k]
                        } else {
                            0.0
                        };
                        assert_eq!(
                            packed[(p * hidden + k) * NB + c],
                            want,
                            "{isa:?} hidden {hidden} p {p} k {k} c {c}"
                        );
                    }
                }
            }
        }
    }
}

// ---- cases --------------------------------------------------------------------

#[test]
fn single_layer_unidirectional() {
    check(&Case::new(1, false, true, 1, 5, 3, 4));
    check(&Case::new(1, false, false, 1, 5, 3, 4));
}

#[test]
fn single_step() {
    check(&Case::new(1, true, true, 1, 1, 4, 3));
    check(&Case {
        state: true,
        ..Case::new(2, true, false, 3, 1, 2, 5)
    });
}

#[test]
fn layers_and_directions() {
    for layers in 1..=3 {
        for bidir in [false, true] {
            for batch_first in [false, true] {
                check(&Case::new(layers, bidir, batch_first, 2, 4, 5, 6));
            }
        }
    }
}

#[test]
fn mixed_lengths() {
    for bidir in [false, true] {
        for batch_first in [false, true] {
            for state in [false, true] {
                let case = Case {
                    lengths: Some(vec![5, 1, 3, 5]),
                    state,
                    ..Case::new(2, bidir, batch_first, 4, 5, 3, 7)
                };
                check(&case);
            }
        }
    }
    // More sequences than one recurrent group holds, all lengths different,
    // and a hidden size whose 4H is not a multiple of the panel width.
    check(&Case {
        lengths: Some(vec![2, 7, 1, 6, 3, 5, 4]),
        state: true,
        ..Case::new(3, true, false, 7, 7, 4, 9)
    });
    check(&Case {
        lengths: Some(vec![1]),
        ..Case::new(1, true, true, 1, 4, 3, 2)
    });
}

#[test]
fn state_and_biases() {
    for state in [false, true] {
        for biases in [false, true] {
            check(&Case {
                state,
                biases,
                ..Case::new(2, true, true, 3, 3, 4, 5)
            });
        }
    }
}

#[test]
fn strided_input() {
    check(&Case {
        strided_x: true,
        ..Case::new(2, true, false, 2, 3, 4, 5)
    });
    check(&Case {
        strided_x: true,
        lengths: Some(vec![3, 2]),
        ..Case::new(1, false, true, 2, 3, 4, 5)
    });
}

#[test]
fn any_number_of_threads() {
    // 1 thread: every shape runs fused; 3 threads: most run in phases.
    for threads in [1, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            check(&Case {
                lengths: Some(vec![2, 4, 1]),
                state: true,
                ..Case::new(2, true, false, 3, 4, 3, 5)
            });
            check(&Case {
                lengths: Some(vec![3, 1]),
                ..Case::new(2, false, true, 2, 3, 2, 4)
            });
            check(&Case::new(1, false, true, 1, 40, 3, 4));
        });
    }
}

#[test]
fn kokoro_size() {
    check(&Case {
        state: true,
        ..Case::new(1, true, true, 1, 7, 640, 256)
    });
}

#[test]
fn empty_batch_is_fine() {
    let cfg = Case::new(1, true, true, 0, 3, 2, 2).cfg();
    let data = make_data(&Case::new(1, true, true, 0, 3, 2, 2), 1);
    let case = Case::new(1, true, true, 0, 3, 2, 2);
    lstm_forward(
        &cfg,
        &[],
        None,
        None,
        &weights(&case, &data),
        &mut [],
        &mut [],
        &mut [],
    )
    .unwrap();
}

// ---- bad input ------------------------------------------------------------------

enum Arg {
    F(Owned<f32>),
    I(Owned<i64>),
}

impl Arg {
    fn view(&mut self) -> TensorView {
        match self {
            Arg::F(o) => o.view(),
            Arg::I(o) => o.view(),
        }
    }
}

fn f(data: Vec<f32>, shape: &[i64]) -> Arg {
    Arg::F(Owned::new(data, shape))
}

fn i(data: Vec<i64>, shape: &[i64]) -> Arg {
    Arg::I(Owned::new(data, shape))
}

/// A valid uni-directional 2-layer call (B=2, T=3, I=4, H=2) with lengths and
/// biases. Tensors: 0 x, 1 lengths, 2-5 layer 0 (w_ih, w_hh, b_ih, b_hh),
/// 6-9 layer 1, 10 y, 11 h_n, 12 c_n. `edit` may change anything first.
fn call_with(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> (Result<Any>, Vec<Arg>) {
    call_with_views(edit, |_| {})
}

/// As [`call_with`], and `edit_views` may then rearrange the tensor views.
fn call_with_views(
    edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>),
    edit_views: impl FnOnce(&mut Vec<TensorView>),
) -> (Result<Any>, Vec<Arg>) {
    let mut ints = vec![2i64, 0, 1, 1, 1, 0];
    let mut t = vec![f(vec![0.5; 24], &[2, 3, 4]), i(vec![3, 2], &[2])];
    for l in 0..2 {
        let in_l = if l == 0 { 4 } else { 2 };
        t.push(f(vec![0.1; 8 * in_l], &[8, in_l as i64]));
        t.push(f(vec![0.1; 16], &[8, 2]));
        t.push(f(vec![0.0; 8], &[8]));
        t.push(f(vec![0.0; 8], &[8]));
    }
    t.push(f(vec![f32::NAN; 12], &[2, 3, 2]));
    t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
    t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
    edit(&mut ints, &mut t);
    let mut views: Vec<TensorView> = t.iter_mut().map(|o| o.view()).collect();
    edit_views(&mut views);
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.extend(views.iter().map(AnyView::from));
    let r = function().call_packed(&args);
    (r, t)
}

fn failure(r: Result<Any>) -> tvm_ffi::Error {
    match r {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e,
    }
}

fn error_of(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> tvm_ffi::Error {
    failure(call_with(edit).0)
}

fn assert_msg(err: &tvm_ffi::Error, kind: tvm_ffi::ErrorKind, needle: &str) {
    assert!(err.message().starts_with("lstm: "), "{}", err.message());
    assert!(
        err.message().contains(needle),
        "{:?} lacks {needle:?}",
        err.message()
    );
    assert_eq!(err.kind(), kind, "{}", err.message());
}

#[test]
fn the_valid_baseline_call_succeeds() {
    let (r, t) = call_with(|_, _| {});
    r.unwrap();
    let Arg::F(y) = &t[10] else { unreachable!() };
    assert!(y.data.iter().all(|v| v.is_finite()));
    // Sequence 1 has length 2: its step 2 is zero.
    assert!(y.data[(3 + 2) * 2..].iter().all(|&v| v == 0.0));
    assert!(y.data[..(3 + 2) * 2].iter().all(|&v| v != 0.0));
}

#[test]
fn wrong_dtype_is_a_type_error() {
    let err = error_of(|_, t| t[3] = i(vec![0; 16], &[8, 2]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: w_hh[layer 0, forward]: expected dtype float32, got int64",
    );
    let err = error_of(|_, t| t[1] = f(vec![3.0, 2.0], &[2]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: lengths: expected dtype int64, got float32",
    );
    let err = error_of(|_, t| t[0] = i(vec![0; 24], &[2, 3, 4]));
    assert_msg(
        &err,
        TYPE_ERROR,
        "lstm: x: expected dtype float32, got int64",
    );
}

#[test]
fn wrong_weight_shape_names_the_weight() {
    let err = error_of(|_, t| t[7] = f(vec![0.1; 24], &[8, 3]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: w_hh[layer 1, forward]: expected shape [8, 2], got [8, 3]",
    );
    let err = error_of(|_, t| t[2] = f(vec![0.1; 40], &[8, 5]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: w_ih[layer 0, forward]: expected shape [8, 4], got [8, 5]",
    );
    let err = error_of(|_, t| t[5] = f(vec![0.0; 4], &[4]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: b_hh[layer 0, forward]: expected shape [8], got [4]",
    );
    let err = error_of(|_, t| t[10] = f(vec![0.0; 12], &[3, 2, 2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: y: expected shape [2, 3, 2], got [3, 2, 2]",
    );
    let err = error_of(|_, t| t[11] = f(vec![0.0; 4], &[2, 2]));
    assert_msg(&err, VALUE_ERROR, "lstm: h_n: expected rank 3, got rank 2");
}

#[test]
fn lengths_out_of_range_are_refused() {
    let err = error_of(|_, t| t[1] = i(vec![3, 0], &[2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths[1] = 0 is out of range 1..=3",
    );
    let err = error_of(|_, t| t[1] = i(vec![4, 2], &[2]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths[0] = 4 is out of range 1..=3",
    );
    let err = error_of(|_, t| t[1] = i(vec![3, 2, 1], &[3]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: lengths: expected shape [2], got [3]",
    );
}

#[test]
fn flags_and_argument_count_are_checked() {
    let err = error_of(|ints, _| ints[4] = 0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: expected 18 arguments for num_layers=2",
    );
    let err = error_of(|_, t| {
        t.pop();
    });
    assert_msg(&err, VALUE_ERROR, "lstm: expected 19 arguments for num_layers=2, bidirectional=0, has_biases=1, has_lengths=1, has_state=0, got 18");
    let err = error_of(|ints, _| ints[1] = 2);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: bidirectional: expected 0 or 1, got 2",
    );
    let err = error_of(|ints, _| ints[0] = 0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: num_layers: expected a value >= 1, got 0",
    );
    let err = failure(function().call_packed(&[AnyView::from(&1i64)]));
    assert_msg(&err, VALUE_ERROR, "lstm: expected at least 6 arguments");
    let one = 1i64;
    let mut x = Owned::new(vec![0.0f32; 2], &[1, 1, 2]);
    let xv = x.view();
    let args = [
        AnyView::from(&one),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&0i64),
        AnyView::from(&one),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
        AnyView::from(&xv),
    ];
    let err = failure(function().call_packed(&args));
    assert_msg(&err, TYPE_ERROR, "lstm: x: expected a tensor");
}

#[test]
fn time_zero_and_aliasing_are_refused() {
    // T = 0.
    let err = error_of(|_, t| t[0] = f(vec![], &[2, 0, 4]));
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: x: the sequence length must be at least 1",
    );
    // The same tensor as h_n and c_n, or as an input and an output.
    let err = failure(call_with_views(|_, _| {}, |v| v[12] = v[11]).0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: h_n: output memory overlaps output c_n",
    );
    let with_state = |ints: &mut Vec<i64>, t: &mut Vec<Arg>| {
        ints[5] = 1;
        t.insert(2, f(vec![0.0; 8], &[2, 2, 2]));
        t.insert(3, f(vec![0.0; 8], &[2, 2, 2]));
    };
    call_with(with_state).0.unwrap();
    let err = failure(call_with_views(with_state, |v| v[13] = v[2]).0);
    assert_msg(
        &err,
        VALUE_ERROR,
        "lstm: h_n: output memory overlaps input h0",
    );
    // Plain entry point: a buffer of the wrong size.
    let case = Case::new(1, false, true, 1, 2, 2, 2);
    let data = make_data(&case, 3);
    let w = weights(&case, &data);
    let mut y = vec![0.0; 3];
    let (mut hn, mut cn) = (vec![0.0; 2], vec![0.0; 2]);
    let err = lstm_forward(
        &case.cfg(),
        &data.x,
        None,
        None,
        &w,
        &mut y,
        &mut hn,
        &mut cn,
    )
    .unwrap_err();
    assert_msg(&err, VALUE_ERROR, "lstm: y: expected 4 elements");
}

/// Timing at Kokoro's shape (I=640, H=256, bidirectional, B=1), not a check:
/// `RAYON_NUM_THREADS=2 cargo test -p tvm-ext --release -- --ignored --nocapture
/// --test-threads=1 timing` (`LSTM_T=32,512` and `LSTM_REPS=100` to vary it).
#[test]
#[ignore]
fn timing_kokoro_shape() {
    let ts: Vec<usize> = match std::env::var("LSTM_T") {
        Ok(v) => v.split(',').map(|t| t.parse().unwrap()).collect(),
        Err(_) => vec![32, 128, 512],
    };
    for t in ts {
        let case = Case::new(1, true, true, 1, t, 640, 256);
        let data = make_data(&case, 7);
        let w = weights(&case, &data);
        let cfg = case.cfg();
        let mut y = vec![0.0; t * 512];
        let (mut hn, mut cn) = (vec![0.0; 512], vec![0.0; 512]);
        let mut times = Vec::new();
        let reps: usize = std::env::var("LSTM_REPS").map_or(23, |v| v.parse().unwrap());
        for _ in 0..reps {
            let start = std::time::Instant::now();
            lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap();
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        let mut sorted = times[3..].to_vec();
        sorted.sort_by(f64::total_cmp);
        println!(
            "I=640 H=256 bidir B=1 T={t}: min {:.2} p10 {:.2} median {:.2} ms",
            sorted[0],
            sorted[sorted.len() / 10],
            sorted[sorted.len() / 2],
        );
    }
}

#[test]
fn absurd_sizes_are_errors_not_panics() {
    let case = Case::new(1, false, true, 1, 2, 2, 2);
    let data = make_data(&case, 3);
    let w = weights(&case, &data);
    let (mut y, mut hn, mut cn) = (vec![0.0; 4], vec![0.0; 2], vec![0.0; 2]);
    for cfg in [
        LstmConfig {
            num_layers: usize::MAX,
            ..case.cfg()
        },
        LstmConfig {
            hidden_size: usize::MAX / 2,
            ..case.cfg()
        },
        LstmConfig {
            batch: usize::MAX / 3,
            seq_len: usize::MAX / 3,
            ..case.cfg()
        },
        LstmConfig {
            num_layers: 0,
            ..case.cfg()
        },
        LstmConfig {
            hidden_size: 0,
            ..case.cfg()
        },
    ] {
        let err =
            lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap_err();
        assert_eq!(err.kind(), VALUE_ERROR);
        assert!(err.message().starts_with("lstm: "), "{}", err.message());
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{self, size, Call, Data, Spec, Value};
    let mut rng = crate::tensor::testing::Rng(0x1579_0001);
    for seed in 0..16u64 {
        let mut case = Case::new(
            1 + rng.below(2),
            rng.below(2) == 1,
            rng.below(2) == 1,
            size(&mut rng, 3),
            1 + size(&mut rng, 5),
            1 + rng.below(5),
            1 + rng.below(7),
        );
        case.state = rng.below(2) == 1;
        case.biases = rng.below(2) == 1;
        if rng.below(2) == 1 {
            case.lengths = Some((0..case.b).map(|_| 1 + rng.below(case.t) as i64).collect());
        }
        let data = make_data(&case, seed);
        let (want_y, want_hn, want_cn) = if case.b == 0 {
            (vec![], vec![], vec![])
        } else {
            reference(&case, &data)
        };
        let cfg = case.cfg();
        let d = cfg.directions();
        let (b, t, h) = (case.b as i64, case.t as i64, case.h as i64);
        let x_shape = if case.batch_first {
            [b, t, case.i as i64]
        } else {
            [t, b, case.i as i64]
        };
        let y_shape = if case.batch_first {
            [b, t, d as i64 * h]
        } else {
            [t, b, d as i64 * h]
        };
        let state_shape = [(case.layers * d) as i64, b, h];
        let mut args = vec![
            ("num_layers", Value::Int(case.layers as i64)),
            ("bidirectional", Value::Int(case.bidir as i64)),
            ("batch_first", Value::Int(case.batch_first as i64)),
            ("has_biases", Value::Int(case.biases as i64)),
            ("has_lengths", Value::Int(case.lengths.is_some() as i64)),
            ("has_state", Value::Int(case.state as i64)),
            ("x", Value::Tensor(Spec::input(data.x.clone(), &x_shape))),
        ];
        if let Some(l) = &case.lengths {
            let spec = Spec::derived(vec![0.0; l.len()], &[b]).with_data(Data::I64(l.clone()));
            args.push(("lengths", Value::Tensor(spec)));
        }
        if case.state {
            args.push((
                "h0",
                Value::Tensor(Spec::derived(data.h0.clone(), &state_shape)),
            ));
            args.push((
                "c0",
                Value::Tensor(Spec::derived(data.c0.clone(), &state_shape)),
            ));
        }
        let g4 = 4 * h;
        for (k, [w_ih, w_hh, b_ih, b_hh]) in data.params.iter().enumerate() {
            let in_l = cfg.layer_input_size(k / d) as i64;
            args.push((
                "w_ih",
                Value::Tensor(Spec::derived(w_ih.clone(), &[g4, in_l])),
            ));
            // The first w_hh decides the hidden size.
            let w_hh = if k == 0 {
                Spec::input(w_hh.clone(), &[g4, h])
            } else {
                Spec::derived(w_hh.clone(), &[g4, h])
            };
            args.push(("w_hh", Value::Tensor(w_hh)));
            if case.biases {
                args.push(("b_ih", Value::Tensor(Spec::derived(b_ih.clone(), &[g4]))));
                args.push(("b_hh", Value::Tensor(Spec::derived(b_hh.clone(), &[g4]))));
            }
        }
        args.push(("y", Value::Tensor(Spec::output(&y_shape))));
        args.push(("h_n", Value::Tensor(Spec::output(&state_shape))));
        args.push(("c_n", Value::Tensor(Spec::output(&state_shape))));
        let exact = |v: Vec<f64>| v.into_iter().map(|v| (v, 0.0)).collect();
        let call = Call {
            global: "kokoro_tvm_ext.lstm",
            args,
            want: vec![
                ("y", exact(want_y)),
                ("h_n", exact(want_hn)),
                ("c_n", exact(want_cn)),
            ],
            rel: 2e-5,
            bad: vec![
                ("num_layers", Value::Int(0)),
                ("bidirectional", Value::Int(2)),
                ("batch_first", Value::Int(-1)),
                ("has_biases", Value::Int(2)),
            ],
        };
        fuzz::check(&call, &mut rng);
        // Lengths outside 1..=T.
        if let Some(l) = case.lengths.as_ref().filter(|l| !l.is_empty()) {
            for wrong in [0, case.t as i64 + 1] {
                let mut bad = l.clone();
                bad[rng.below(l.len())] = wrong;
                let mut args = call.args.clone();
                let k = args.iter().position(|(n, _)| *n == "lengths").unwrap();
                args[k].1 = Value::Tensor(
                    Spec::derived(vec![0.0; l.len()], &[b]).with_data(Data::I64(bad)),
                );
                fuzz::expect_rejected(
                    &Call {
                        args,
                        ..call.clone()
                    },
                    "lengths",
                );
            }
        }
    }
}
