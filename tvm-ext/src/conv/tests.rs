use super::reference::{reference_conv, reference_transpose};
use super::*;
use crate::tensor::testing::{assert_close_to, Owned, Rng};
use tvm_ffi::{Any, TYPE_ERROR};

fn assert_close(what: &str, got: &[f32], want: &[(f64, f64)]) {
    assert_close_to(what, got, want, 1e-4)
}

/// (batch, cin, cout, length, kernel, stride, pad_left, pad_right, dilation, groups,
/// output_padding, has_bias, strided x)
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    bool,
    bool,
);

fn config(c: &Case) -> Conv1dConfig {
    let &(
        batch,
        cin,
        cout,
        length,
        kernel,
        stride,
        pad_left,
        pad_right,
        dilation,
        groups,
        op,
        _,
        _,
    ) = c;
    Conv1dConfig {
        batch,
        in_channels: cin,
        out_channels: cout,
        length,
        kernel,
        stride,
        pad_left,
        pad_right,
        dilation,
        groups,
        output_padding: op,
    }
}

/// `x` as TVM could hand it over: dense, or stored `[B, L, Cin]` and viewed
/// transposed, one element into its buffer.
fn x_tensor(c: &Conv1dConfig, x: &[f32], strided: bool) -> Owned<f32> {
    let shape = [c.batch as i64, c.in_channels as i64, c.length as i64];
    if !strided {
        return Owned::new(x.to_vec(), &shape);
    }
    let (ci, l) = (c.in_channels, c.length);
    let mut store = vec![f32::NAN; 1 + x.len()];
    for b in 0..c.batch {
        for ch in 0..ci {
            for t in 0..l {
                store[1 + (b * l + t) * ci + ch] = x[(b * ci + ch) * l + t];
            }
        }
    }
    Owned::strided(store, &shape, &[(l * ci) as i64, 1, ci as i64], 4)
}

fn call(
    transpose: bool,
    c: &Conv1dConfig,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    strided: bool,
) -> Vec<f32> {
    let lout = if transpose {
        c.transpose_out_len()
    } else {
        c.conv_out_len()
    }
    .unwrap();
    let w_shape = if transpose {
        [c.in_channels, c.out_channels / c.groups, c.kernel]
    } else {
        [c.out_channels, c.in_channels / c.groups, c.kernel]
    };
    let mut ints = vec![c.stride as i64, c.pad_left as i64, c.pad_right as i64];
    if transpose {
        ints.push(c.output_padding as i64);
    }
    ints.extend([c.dilation as i64, c.groups as i64, bias.is_some() as i64]);
    let mut xt = x_tensor(c, x, strided);
    let mut wt = Owned::new(w.to_vec(), &w_shape.map(|d| d as i64));
    let mut bt = bias.map(|b| Owned::new(b.to_vec(), &[b.len() as i64]));
    let mut ot = Owned::new(
        vec![f32::NAN; c.batch * c.out_channels * lout],
        &[c.batch as i64, c.out_channels as i64, lout as i64],
    );
    let mut views = vec![xt.view(), wt.view()];
    if let Some(b) = bt.as_mut() {
        views.push(b.view());
    }
    views.push(ot.view());
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.extend(views.iter().map(AnyView::from));
    let f = if transpose {
        transpose_function()
    } else {
        function()
    };
    f.call_packed(&args)
        .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
    drop(views);
    ot.data
}

fn check(transpose: bool, case: &Case) {
    let c = config(case);
    let (has_bias, strided) = (case.11, case.12);
    let mut rng = Rng(0x5eed ^ (c.in_channels * 131 + c.length * 7 + c.kernel) as u64);
    let x = rng.vec(c.batch * c.in_channels * c.length);
    let w_len = c.in_channels / c.groups * c.out_channels * c.kernel;
    let w = rng.vec(w_len);
    let bias = if has_bias {
        Some(rng.vec(c.out_channels))
    } else {
        None
    };
    let (want, lout) = if transpose {
        (
            reference_transpose(&c, &x, &w, bias.as_deref()),
            c.transpose_out_len().unwrap(),
        )
    } else {
        (
            reference_conv(&c, &x, &w, bias.as_deref()),
            c.conv_out_len().unwrap(),
        )
    };
    let got = call(transpose, &c, &x, &w, bias.as_deref(), strided);
    assert_close(&format!("{c:?} (packed)"), &got, &want);
    // Every path, with tiles small enough to split any case.
    for tuning in [
        Tuning {
            tile_bytes: 1024,
            weight_bytes: 256,
            direct: Some(false),
        },
        Tuning {
            tile_bytes: 1 << 20,
            weight_bytes: 1 << 20,
            direct: Some(false),
        },
        Tuning {
            tile_bytes: 1024,
            weight_bytes: 256,
            direct: Some(true),
        },
    ] {
        let mut out = vec![f32::NAN; want.len()];
        let r = if transpose {
            transpose_run(&c, lout, &x, &w, bias.as_deref(), &mut out, tuning)
        } else {
            conv1d_run(&c, lout, &x, &w, bias.as_deref(), &mut out, tuning)
        };
        r.unwrap();
        assert_close(&format!("{c:?} {tuning:?}"), &out, &want);
    }
}

#[test]
fn conv1d_matches_reference() {
    let cases: &[Case] = &[
        // b, cin, cout, l, k, s, pl, pr, d, g, op, bias, strided
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false, false),
        (2, 3, 5, 17, 3, 1, 1, 1, 1, 1, 0, true, false),
        (1, 20, 36, 50, 7, 1, 9, 9, 3, 1, 0, true, true),
        (2, 12, 18, 33, 5, 2, 3, 1, 2, 3, 0, true, false),
        (1, 8, 8, 40, 3, 1, 1, 1, 1, 8, 0, true, true),
        (1, 4, 8, 25, 3, 1, 0, 2, 1, 2, 0, false, false),
        (3, 17, 19, 1, 1, 1, 0, 0, 1, 1, 0, true, false),
        (1, 16, 18, 300, 11, 1, 25, 25, 5, 1, 0, true, false),
        (1, 6, 4, 10, 4, 3, 0, 0, 1, 1, 0, true, true),
        (1, 5, 7, 9, 3, 1, 4, 4, 2, 1, 0, true, false),
        (2, 10, 10, 3, 5, 1, 2, 2, 1, 1, 0, false, false),
        (1, 22, 24, 61, 12, 6, 4, 3, 1, 1, 0, true, false),
        (2, 9, 6, 30, 1, 1, 0, 0, 1, 3, 0, false, true),
    ];
    for case in cases {
        check(false, case);
    }
}

#[test]
fn conv1d_transpose_matches_reference() {
    let cases: &[Case] = &[
        // b, cin, cout, l, k, s, pl, pr, d, g, op, bias, strided
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false, false),
        (1, 12, 10, 20, 20, 10, 5, 5, 1, 1, 0, true, false),
        (2, 9, 6, 15, 12, 6, 3, 3, 1, 1, 0, true, true),
        (1, 8, 8, 13, 3, 2, 1, 1, 1, 8, 1, true, false),
        (1, 6, 9, 11, 5, 2, 2, 0, 3, 3, 1, true, false),
        (2, 10, 12, 7, 3, 4, 0, 0, 1, 2, 3, false, true),
        (1, 5, 7, 1, 4, 3, 1, 2, 1, 1, 0, true, false),
        (1, 16, 20, 40, 4, 1, 1, 2, 2, 1, 1, true, false),
        (1, 7, 4, 9, 6, 3, 0, 4, 2, 1, 2, false, false),
        (1, 24, 20, 150, 8, 4, 2, 2, 1, 1, 0, true, false),
        (1, 4, 4, 5, 1, 1, 0, 0, 1, 1, 0, true, false),
        (3, 6, 3, 4, 3, 5, 0, 1, 1, 3, 2, true, true),
        // One output channel of many taps (the inverse STFT's 22 -> 1, 20 taps at hop 5) and the
        // edge of the GEMM route, Cout/g * K = 8 columns, and just below it (the direct loop).
        (1, 22, 1, 60, 20, 5, 0, 0, 1, 1, 0, true, false),
        (1, 8, 2, 17, 4, 3, 1, 1, 1, 1, 0, false, false),
        (2, 6, 3, 9, 2, 2, 0, 0, 1, 1, 1, true, true),
    ];
    for case in cases {
        check(true, case);
    }
}

fn args_of<'a>(ints: &'a [i64], views: &'a [TensorView]) -> Vec<AnyView<'a>> {
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.extend(views.iter().map(AnyView::from));
    args
}

fn message(r: Result<Any>, kind: tvm_ffi::ErrorKind, want: &str) {
    match r {
        Ok(_) => panic!("the call should fail with {want:?}"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{}", e.message());
            assert!(
                e.message().contains(want),
                "{:?} does not contain {want:?}",
                e.message()
            );
        }
    }
}

fn f32s(shape: &[i64]) -> Owned<f32> {
    Owned::new(vec![0.5; shape.iter().product::<i64>() as usize], shape)
}

#[test]
fn valid_range_matches_a_scan() {
    for n in [0usize, 1, 5, 17] {
        for s in [1usize, 2, 3, 7] {
            for off in -40i128..40 {
                for limit in [0usize, 1, 9, 30] {
                    let want: Vec<usize> = (0..n)
                        .filter(|&j| (0..limit as i128).contains(&(j as i128 * s as i128 + off)))
                        .collect();
                    let got: Vec<usize> = valid_range(n, s, off, limit).collect();
                    assert_eq!(got, want, "n={n} s={s} off={off} limit={limit}");
                }
            }
        }
    }
}

#[test]
fn conv1d_rejects_bad_arguments() {
    let f = function();
    let good = [1i64, 1, 1, 1, 1, 1];
    let run = |ints: &[i64], shapes: &[&[i64]]| {
        let mut ts: Vec<Owned<f32>> = shapes.iter().map(|s| f32s(s)).collect();
        let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
        f.call_packed(&args_of(ints, &views))
    };
    let ok: [&[i64]; 4] = [&[1, 3, 8], &[4, 3, 3], &[4], &[1, 4, 8]];
    run(&good, &ok).unwrap();
    message(
        run(&good[..3], &[]),
        VALUE_ERROR,
        "conv1d: expected at least 6 arguments",
    );
    message(
        run(&good, &ok[..3]),
        VALUE_ERROR,
        "conv1d: expected 10 arguments for has_bias=1, got 9",
    );
    message(
        run(&[0, 1, 1, 1, 1, 1], &ok),
        VALUE_ERROR,
        "conv1d: stride: expected a value in [1, 2147483647], got 0",
    );
    message(
        run(&[1, -1, 1, 1, 1, 1], &ok),
        VALUE_ERROR,
        "conv1d: pad_left: expected a value in [0,",
    );
    message(
        run(&[1, 1, 1, 0, 1, 1], &ok),
        VALUE_ERROR,
        "conv1d: dilation: expected a value in [1,",
    );
    message(
        run(&[1, 1, 1, 1, 1, 2], &ok),
        VALUE_ERROR,
        "conv1d: has_bias: expected 0 or 1, got 2",
    );
    message(
        run(&[1, 1, 1, 1, 2, 1], &ok),
        VALUE_ERROR,
        "conv1d: groups: 2 does not divide the 3 input channels of x",
    );
    message(
        run(
            &[1, 1, 1, 1, 3, 1],
            &[&[1, 3, 8], &[4, 1, 3], &[4], &[1, 4, 8]],
        ),
        VALUE_ERROR,
        "conv1d: groups: 3 does not divide the 4 output channels",
    );
    message(
        run(&good, &[&[3, 8], &[4, 3, 3], &[4], &[1, 4, 8]]),
        VALUE_ERROR,
        "conv1d: x: expected rank 3, got rank 2",
    );
    message(
        run(&good, &[&[1, 3, 8], &[4, 2, 3], &[4], &[1, 4, 8]]),
        VALUE_ERROR,
        "conv1d: w: expected shape [4, 3, 3], got [4, 2, 3]",
    );
    message(
        run(&good, &[&[1, 3, 8], &[4, 3, 0], &[4], &[1, 4, 8]]),
        VALUE_ERROR,
        "conv1d: w: the kernel size must be at least 1",
    );
    message(
        run(&good, &[&[1, 3, 8], &[4, 3, 3], &[5], &[1, 4, 8]]),
        VALUE_ERROR,
        "conv1d: bias: expected shape [4], got [5]",
    );
    message(
        run(&good, &[&[1, 3, 8], &[4, 3, 3], &[4], &[1, 4, 9]]),
        VALUE_ERROR,
        "conv1d: out: expected shape [1, 4, 8], got [1, 4, 9]",
    );
    message(
        run(
            &[1, 0, 0, 1, 1, 1],
            &[&[1, 3, 2], &[4, 3, 3], &[4], &[1, 4, 1]],
        ),
        VALUE_ERROR,
        "conv1d: x: the padded length 2 is shorter than the dilated kernel 3",
    );

    // Wrong dtype, a non-tensor, a strided or aliasing output.
    let mut x = Owned::new(vec![1i64; 24], &[1, 3, 8]);
    let mut w = f32s(&[4, 3, 3]);
    let mut o = f32s(&[1, 4, 8]);
    let views = [x.view(), w.view(), o.view()];
    let ints = [1i64, 1, 1, 1, 1, 0];
    message(
        f.call_packed(&args_of(&ints, &views)),
        TYPE_ERROR,
        "conv1d: x: expected dtype float32, got int64",
    );
    let mut args = args_of(&ints, &views);
    args[6] = AnyView::from(&ints[0]);
    message(
        f.call_packed(&args),
        TYPE_ERROR,
        "conv1d: x: expected a tensor",
    );
    let mut x = f32s(&[1, 3, 8]);
    let mut so = Owned::strided(vec![0.0f32; 32], &[1, 4, 8], &[32, 1, 4], 0);
    let views = [x.view(), w.view(), so.view()];
    message(
        f.call_packed(&args_of(&ints, &views)),
        VALUE_ERROR,
        "conv1d: out: output tensors must be contiguous",
    );
    let mut sq = f32s(&[1, 4, 8]);
    let mut w4 = f32s(&[4, 4, 3]);
    let v = sq.view();
    let views = [v, w4.view(), sq.view()];
    message(
        f.call_packed(&args_of(&ints, &views)),
        VALUE_ERROR,
        "conv1d: out: output memory overlaps input x",
    );
}

#[test]
fn conv1d_transpose_rejects_bad_arguments() {
    let f = transpose_function();
    let run = |ints: &[i64], shapes: &[&[i64]]| {
        let mut ts: Vec<Owned<f32>> = shapes.iter().map(|s| f32s(s)).collect();
        let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
        f.call_packed(&args_of(ints, &views))
    };
    // L=5, s=2, K=3, p=1, op=1: Lout = 4*2 - 2 + 2 + 1 + 1 = 10.
    let good = [2i64, 1, 1, 1, 1, 1, 1];
    let ok: [&[i64]; 4] = [&[1, 4, 5], &[4, 3, 3], &[3], &[1, 3, 10]];
    run(&good, &ok).unwrap();
    message(
        run(&good[..6], &[]),
        VALUE_ERROR,
        "conv1d_transpose: expected at least 7 arguments",
    );
    message(
        run(&good, &ok[..3]),
        VALUE_ERROR,
        "conv1d_transpose: expected 11 arguments for has_bias=1, got 10",
    );
    message(
        run(&[2, 1, 1, 2, 1, 1, 1], &ok),
        VALUE_ERROR,
        "conv1d_transpose: output_padding: must be smaller than stride or dilation",
    );
    message(
        run(&[2, 1, 1, 1, 1, 0, 1], &ok),
        VALUE_ERROR,
        "conv1d_transpose: groups: expected a value in [1,",
    );
    message(
        run(&[2, 1, 1, 1, 1, 3, 1], &ok),
        VALUE_ERROR,
        "conv1d_transpose: groups: 3 does not divide the 4 input channels of x",
    );
    message(
        run(&good, &[&[1, 4, 5], &[3, 3, 3], &[3], &[1, 3, 10]]),
        VALUE_ERROR,
        "conv1d_transpose: w: expected shape [4, 3, 3], got [3, 3, 3]",
    );
    message(
        run(&good, &[&[1, 4, 5], &[4, 3, 3], &[3], &[1, 3, 11]]),
        VALUE_ERROR,
        "conv1d_transpose: out: expected shape [1, 3, 10], got [1, 3, 11]",
    );
    message(
        run(&good, &[&[1, 4, 5], &[4, 3, 3], &[4], &[1, 3, 10]]),
        VALUE_ERROR,
        "conv1d_transpose: bias: expected shape [3], got [4]",
    );
    message(
        run(&[1, 3, 3, 0, 1, 1, 0], &[&[1, 4, 2], &[4, 3, 3], &[1, 3, 1]]),
        VALUE_ERROR,
        "conv1d_transpose: the output length (L-1)*stride - pad_left - pad_right + dilation*(K-1) + output_padding + 1 = -2 must be at least 1",
    );
}

#[test]
fn plain_entry_points_check_lengths() {
    let c = config(&(1, 2, 2, 4, 3, 1, 1, 1, 1, 1, 0, false, false));
    let mut out = vec![0.0f32; 8];
    let err = conv1d_forward(&c, &[0.0; 7], &[0.0; 12], None, &mut out).unwrap_err();
    assert!(
        err.message().contains("conv1d: x: expected 8 elements"),
        "{}",
        err.message()
    );
    let err =
        conv1d_transpose_forward(&c, &[0.0; 8], &[0.0; 12], Some(&[0.0; 3]), &mut out).unwrap_err();
    assert!(
        err.message()
            .contains("conv1d_transpose: bias: expected 2 elements"),
        "{}",
        err.message()
    );
}

/// `cargo test --release -p tvm-ext bench_conv -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_conv() {
    let reps_for = |flops: f64| ((2e10 / flops) as usize).clamp(2, 200);
    let conv: &[(usize, usize, usize, usize, usize)] = &[
        (128, 128, 7, 3, 19200),
        (256, 256, 11, 5, 3200),
        (512, 512, 3, 1, 320),
        (128, 128, 3, 1, 19200),
        (512, 512, 7, 1, 320),
    ];
    for &(cin, cout, k, d, l) in conv {
        let p = d * (k - 1) / 2;
        let c = config(&(1, cin, cout, l, k, 1, p, p, d, 1, 0, true, false));
        let lout = c.conv_out_len().unwrap();
        let mut rng = Rng(1);
        let (x, w, b) = (rng.vec(cin * l), rng.vec(cout * cin * k), rng.vec(cout));
        let mut out = vec![0.0f32; cout * lout];
        let flops = 2.0 * (cin * cout * k * lout) as f64;
        let reps = reps_for(flops);
        conv1d_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                conv1d_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "conv1d {cin}->{cout} k{k} d{d} L{l}: {:.3} ms {:.1} GFLOP/s",
            best * 1e3,
            flops / best / 1e9
        );
    }
    // cin, cout, k, stride, pad, output_padding, groups, length
    type Tr = (usize, usize, usize, usize, usize, usize, usize, usize);
    let tr: &[Tr] = &[
        (512, 256, 20, 10, 5, 0, 1, 320),
        (512, 256, 20, 10, 5, 0, 1, 100),
        (256, 128, 12, 6, 3, 0, 1, 3200),
        (1090, 1090, 3, 2, 1, 1, 1090, 160),
        (512, 512, 3, 2, 1, 1, 512, 3200),
    ];
    for &(cin, cout, k, s, p, op, g, l) in tr {
        let c = config(&(1, cin, cout, l, k, s, p, p, 1, g, op, true, false));
        let lout = c.transpose_out_len().unwrap();
        let mut rng = Rng(2);
        let (x, w, b) = (rng.vec(cin * l), rng.vec(cin * cout / g * k), rng.vec(cout));
        let mut out = vec![0.0f32; cout * lout];
        let flops = 2.0 * (cin * cout / g * k * l) as f64;
        let reps = reps_for(flops);
        conv1d_transpose_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                conv1d_transpose_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "convT {cin}->{cout} k{k} s{s} g{g} L{l}: {:.3} ms {:.1} GFLOP/s",
            best * 1e3,
            flops / best / 1e9
        );
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::conv::testing::{conv_bad_scalars, ConvCase};
    use crate::tensor::fuzz::{check, Call, Spec, Value};
    let mut rng = Rng(0xc0a7_0001);
    for case in 0..48 {
        let case = ConvCase::random(&mut rng, case % 2 == 1);
        let w = Spec::input(case.w.clone(), &case.w_shape().map(|v| v as i64));
        let mut args = case.args(w, &[]);
        args.push(("out", Value::Tensor(Spec::output(&case.out_shape()))));
        let call = Call {
            global: case.global(false),
            args,
            want: vec![("out", case.reference(&case.x, &case.w))],
            rel: 1e-5,
            bad: conv_bad_scalars(&case.c, case.transpose),
        };
        check(&call, &mut rng);
    }
}
