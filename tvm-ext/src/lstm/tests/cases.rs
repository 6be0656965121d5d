//! Accuracy, and the shapes, lengths and options the kernel must get right.
use super::*;

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

#[test]
fn a_sequence_gives_the_same_bits_alone_or_in_a_group() {
    // The text stage batches requests: each one's audio must equal its solo run,
    // so the grouped recurrent product must sum exactly as the single one does.
    for hidden in [1usize, 2, 5, 16, 33, 256] {
        let gp = (4 * hidden).div_ceil(NB) * NB;
        let w = Rng(hidden as u64 + 7).vec(4 * hidden * hidden, 1.0);
        let init: Vec<Vec<f32>> = (0..MAX_GROUP)
            .map(|j| Rng(j as u64 + 100).vec(gp, 1.0))
            .collect();
        let h: Vec<Vec<f32>> = (0..MAX_GROUP)
            .map(|j| Rng(j as u64 + 200).vec(hidden, 1.0))
            .collect();
        for isa in Isa::available() {
            let packed = pack_recurrent(isa, &w, hidden, gp);
            let solo: Vec<Vec<f32>> = (0..MAX_GROUP)
                .map(|j| {
                    let mut out = vec![0.0; gp];
                    recurrent_matmul(isa, &packed, hidden, &[&init[j]], &[&h[j]], &mut out, gp);
                    out
                })
                .collect();
            for s in 2..=MAX_GROUP {
                let mut out = vec![0.0; s * gp];
                let inits: Vec<&[f32]> = init[..s].iter().map(|v| v.as_slice()).collect();
                let hs: Vec<&[f32]> = h[..s].iter().map(|v| v.as_slice()).collect();
                recurrent_matmul(isa, &packed, hidden, &inits, &hs, &mut out, gp);
                // Panel by panel, as a step shared out by blocks of units computes it.
                let mut by_panel = vec![0.0; s * gp];
                for p in 0..gp / NB {
                    let cols = p * NB..(p + 1) * NB;
                    let inits: Vec<&[f32]> = init[..s].iter().map(|v| &v[cols.clone()]).collect();
                    recurrent_matmul(
                        isa,
                        &packed[cols.start * hidden..cols.end * hidden],
                        hidden,
                        &inits,
                        &hs,
                        &mut by_panel[cols.start..],
                        gp,
                    );
                }
                assert!(
                    out.iter()
                        .zip(&by_panel)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?} hidden {hidden}: {s} sequences panel by panel differ from one call"
                );
                for j in 0..s {
                    let got = &out[j * gp..(j + 1) * gp];
                    let same = got
                        .iter()
                        .zip(&solo[j])
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{isa:?} hidden {hidden}: sequence {j} of {s} differs from its solo run"
                    );
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
fn threads_sharing_steps_give_the_same_bits() {
    // Fewer (direction, group) tasks than threads: the steps' blocks of units are
    // shared out among the threads, in whatever order they claim them; H = 128
    // has two blocks, H = 40 one. Lengths and initial state exercise a reverse
    // sequence joining late and a forward one stopping early.
    let cases = [
        Case {
            lengths: Some(vec![9, 4]),
            state: true,
            ..Case::new(2, true, true, 2, 9, 6, 128)
        },
        Case {
            lengths: Some(vec![5, 11, 2]),
            state: true,
            ..Case::new(3, false, false, 3, 11, 40, 128)
        },
        Case::new(2, false, true, 1, 12, 8, 40),
    ];
    for case in &cases {
        let data = make_data(case, 5);
        let w = weights(case, &data);
        let cfg = case.cfg();
        let d = cfg.directions();
        let state = case.state.then_some((&data.h0[..], &data.c0[..]));
        let run = |threads: usize| {
            let mut y = vec![f32::NAN; case.b * case.t * d * case.h];
            let mut hn = vec![f32::NAN; case.layers * d * case.b * case.h];
            let mut cn = hn.clone();
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| {
                    lstm_forward(
                        &cfg,
                        &data.x,
                        case.lengths.as_deref(),
                        state,
                        &w,
                        &mut y,
                        &mut hn,
                        &mut cn,
                    )
                    .unwrap()
                });
            [y, hn, cn].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
        };
        let one = run(1);
        for threads in [2, 3, 4, 6] {
            assert!(
                run(threads) == one,
                "{case:?}: {threads} threads differ from one"
            );
        }
    }
    // And against the reference, with the steps shared.
    rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap()
        .install(|| cases.iter().for_each(check));
}

#[test]
fn a_shared_step_finishes_when_no_helper_can_start() {
    // Two threads, one of them held by another job until the call is done: the
    // call plans a helper that never runs alongside it, so its own thread must do
    // every block of every step (a thread that waited for its planned helper
    // would hang here), and give the bits of a one-thread run.
    let case = Case::new(2, false, true, 1, 20, 8, 128);
    let data = make_data(&case, 9);
    let run = move |pool: &rayon::ThreadPool| {
        let (w, cfg) = (weights(&case, &data), case.cfg());
        let mut y = vec![f32::NAN; 20 * 128];
        let (mut hn, mut cn) = (vec![f32::NAN; 2 * 128], vec![f32::NAN; 2 * 128]);
        pool.install(|| {
            lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap()
        });
        [y, hn, cn].map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
    };
    let one = run(&rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    pool.spawn(move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv(); // the test ends it, passing or failing
    });
    started_rx.recv().unwrap();
    // On a thread of its own, so that a hang fails the test instead of stalling the run.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(run(&pool)).unwrap());
    let got = done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the call waited for a helper that could not start");
    release_tx.send(()).unwrap();
    assert!(
        got == one,
        "a step shared out with no helper gave other bits than one thread"
    );
}

/// Timing at the speaker encoder's shape (3 layers, I=40, H=256, T=160,
/// batch first), not a check: `RAYON_NUM_THREADS=2 cargo test -p tvm-ext --release
/// -- --ignored --nocapture --test-threads=1 timing_speaker` (`LSTM_B=1,4,16`).
#[test]
#[ignore]
fn timing_speaker_shape() {
    let bs: Vec<usize> = match std::env::var("LSTM_B") {
        Ok(v) => v.split(',').map(|b| b.parse().unwrap()).collect(),
        Err(_) => vec![1, 4, 11, 16],
    };
    for b in bs {
        let sorted = forward_times(&Case::new(3, false, true, b, 160, 40, 256));
        println!(
            "I=40 H=256 3 layers B={b} T=160 on {} threads: min {:.2} median {:.2} ms",
            rayon::current_num_threads(),
            sorted[0],
            sorted[sorted.len() / 2],
        );
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
        let sorted = forward_times(&Case::new(1, true, true, 1, t, 640, 256));
        println!(
            "I=640 H=256 bidir B=1 T={t}: min {:.2} p10 {:.2} median {:.2} ms",
            sorted[0],
            sorted[sorted.len() / 10],
            sorted[sorted.len() / 2],
        );
    }
}

/// The timing tests' calls of `case` (`LSTM_REPS`, default 23), in ms, sorted,
/// without the first three.
fn forward_times(case: &Case) -> Vec<f64> {
    let data = make_data(case, 7);
    let w = weights(case, &data);
    let cfg = case.cfg();
    let d = cfg.directions();
    let mut y = vec![0.0; case.b * case.t * d * case.h];
    let mut hn = vec![0.0; case.layers * d * case.b * case.h];
    let mut cn = hn.clone();
    let reps: usize = std::env::var("LSTM_REPS").map_or(23, |v| v.parse().unwrap());
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = std::time::Instant::now();
            lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap();
            start.elapsed().as_secs_f64() * 1e3
        })
        .skip(3)
        .collect();
    times.sort_by(f64::total_cmp);
    times
}
