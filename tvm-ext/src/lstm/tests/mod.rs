//! The LSTM's tests, against straight f64 loops with torch's packed-sequence
//! semantics: the shared data, reference and checks here; `cases.rs` the
//! accuracy and shapes, `errors.rs` the calls that must fail, `registry.rs`
//! the property test at the FFI boundary.
use super::*;
use crate::tensor::testing::Owned;
use tvm_ffi::{TensorView, TYPE_ERROR};

mod cases;
mod errors;
mod registry;

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
