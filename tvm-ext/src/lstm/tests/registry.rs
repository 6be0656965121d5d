//! The property test at the FFI boundary ([`crate::tensor::fuzz`]).
use super::*;

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
