use super::*;
use crate::conv::driver::{conv_tiles, packed_forward, transpose_tiles};
use crate::conv::Conv1dConfig;
use crate::conv::{conv1d_forward, conv1d_transpose_forward};
use crate::gemm::bf16::packed_shape;
use crate::gemm::bf16::testing::{assert_close, pack, packed, rounded};
use crate::gemm::bf16::Kind;
use crate::gemm::bf16::{pack_b, pack_conv1d};
use crate::gemm::threads;
use crate::precision::Precision;
use crate::tensor::testing::{cpu_seconds, Owned, Rng, PROCESS_CPU};
use tvm_ffi::Any;
use tvm_ffi::TensorView;
use tvm_ffi::{AnyView, Result};

/// (batch, cin, cout, length, kernel, stride, pad_left, pad_right, dilation, groups, output_padding, bias)
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
);

fn config(c: &Case) -> Conv1dConfig {
    let &(
        batch,
        in_channels,
        out_channels,
        length,
        kernel,
        stride,
        pad_left,
        pad_right,
        dilation,
        groups,
        op,
        _,
    ) = c;
    Conv1dConfig {
        batch,
        in_channels,
        out_channels,
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

/// The registered bf16 kernel against the f32 one on rounded inputs (tight),
/// and each tile path of the bf16 kernel with small tiles.
fn check_conv(transpose: bool, case: &Case) {
    let c = config(case);
    let mut rng = Rng((c.in_channels * 131 + c.length * 7 + c.kernel) as u64);
    let x = rng.vec(c.batch * c.in_channels * c.length);
    let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
    let w_shape = if transpose {
        [c.in_channels, cout_g, c.kernel]
    } else {
        [c.out_channels, cin_g, c.kernel]
    };
    let w = rng.vec(w_shape.iter().product());
    let bias = case.11.then(|| rng.vec(c.out_channels));
    let lout = if transpose {
        c.transpose_out_len()
    } else {
        c.conv_out_len()
    }
    .unwrap();
    let n_out = c.batch * c.out_channels * lout;
    let (xr, wr) = (rounded(&x), rounded(&w));
    let (mut want, mut scale) = (vec![0.0f32; n_out], vec![0.0f32; n_out]);
    let (xa, wa): (Vec<f32>, Vec<f32>) = (
        xr.iter().map(|v| v.abs()).collect(),
        wr.iter().map(|v| v.abs()).collect(),
    );
    if transpose {
        conv1d_transpose_forward(&c, &xr, &wr, bias.as_deref(), &mut want).unwrap();
        conv1d_transpose_forward(&c, &xa, &wa, None, &mut scale).unwrap();
    } else {
        conv1d_forward(&c, &xr, &wr, bias.as_deref(), &mut want).unwrap();
        conv1d_forward(&c, &xa, &wa, None, &mut scale).unwrap();
    }
    let kind = if transpose {
        "conv1d_transpose"
    } else {
        "conv1d"
    };
    let mut wp = pack(kind, c.groups as i64, &w, &w_shape.map(|d| d as i64));
    let mut xt = Owned::new(
        x.clone(),
        &[c.batch as i64, c.in_channels as i64, c.length as i64],
    );
    let mut bt = bias
        .as_ref()
        .map(|b| Owned::new(b.clone(), &[b.len() as i64]));
    let mut ot = Owned::new(
        vec![f32::NAN; n_out],
        &[c.batch as i64, c.out_channels as i64, lout as i64],
    );
    let mut ints = vec![c.stride as i64, c.pad_left as i64, c.pad_right as i64];
    if transpose {
        ints.push(c.output_padding as i64);
    }
    ints.extend([
        c.dilation as i64,
        c.groups as i64,
        bias.is_some() as i64,
        c.kernel as i64,
    ]);
    let mut views = vec![xt.view(), wp.view()];
    if let Some(b) = bt.as_mut() {
        views.push(b.view());
    }
    views.push(ot.view());
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.extend(views.iter().map(AnyView::from));
    let f = if transpose {
        conv1d_transpose_function()
    } else {
        conv1d_function()
    };
    f.call_packed(&args)
        .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
    drop(args);
    drop(views);
    // Without native bf16 the fallback computes on f32 x: compare loosely.
    let got = &ot.data;
    if Bf16Gemm::native() {
        assert_close(&format!("{c:?}"), got, &want, &scale);
    } else {
        for (i, (g, wv)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - wv).abs() <= 1e-2 * (1.0 + scale[i]),
                "{c:?} fallback [{i}]: {g} vs {wv}"
            );
        }
    }
    if !Bf16Gemm::native() {
        return;
    }
    // Small tiles and weight blocks: every split of the tiling.
    let wp32: Vec<u32> = wp
        .data
        .chunks_exact(2)
        .map(|p| p[0].0 as u32 | (p[1].0 as u32) << 16)
        .collect();
    for tuning in [
        Tuning {
            tile_bytes: 256,
            weight_bytes: 64,
            direct: None,
        },
        Tuning {
            tile_bytes: 1 << 22,
            weight_bytes: 1 << 22,
            direct: None,
        },
    ] {
        let mut out = vec![f32::NAN; n_out];
        if transpose {
            transpose_tiles::<Bf16Gemm>(&c, lout, &x, &wp32, bias.as_deref(), &mut out, tuning)
                .unwrap();
        } else {
            conv_tiles::<Bf16Gemm>(
                &c,
                lout,
                &x,
                &wp32,
                bias.as_deref(),
                &mut out,
                tuning.tile_bytes,
            )
            .unwrap();
        }
        assert_close(&format!("{c:?} {tuning:?}"), &out, &want, &scale);
    }
}

#[test]
fn conv1d_bf16_matches_f32_on_rounded_inputs() {
    let cases: &[Case] = &[
        // b, cin, cout, l, k, s, pl, pr, d, g, op, bias
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
        (2, 3, 5, 17, 3, 1, 1, 1, 1, 1, 0, true),
        (1, 20, 36, 50, 7, 1, 9, 9, 3, 1, 0, true),
        (2, 12, 18, 33, 5, 2, 3, 1, 2, 3, 0, true),
        (1, 8, 8, 40, 3, 1, 1, 1, 1, 8, 0, true),
        (1, 17, 33, 100, 1, 1, 0, 0, 1, 1, 0, false),
        (1, 16, 18, 300, 11, 1, 25, 25, 5, 1, 0, true),
        (1, 22, 24, 61, 12, 6, 4, 3, 1, 1, 0, true),
        (1, 64, 70, 130, 3, 1, 1, 1, 1, 1, 0, true),
    ];
    for case in cases {
        check_conv(false, case);
    }
}

#[test]
fn conv1d_transpose_bf16_matches_f32_on_rounded_inputs() {
    let cases: &[Case] = &[
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
        (1, 12, 10, 20, 20, 10, 5, 5, 1, 1, 0, true),
        (2, 9, 6, 15, 12, 6, 3, 3, 1, 1, 0, true),
        (1, 8, 8, 13, 3, 2, 1, 1, 1, 8, 1, true),
        (1, 6, 9, 11, 5, 2, 2, 0, 3, 3, 1, true),
        (1, 5, 7, 1, 4, 3, 1, 2, 1, 1, 0, true),
        (1, 33, 20, 150, 8, 4, 2, 2, 1, 1, 0, true),
        (1, 40, 36, 70, 12, 6, 3, 3, 1, 1, 0, false),
    ];
    for case in cases {
        check_conv(true, case);
    }
}

#[test]
fn conv1d_bf16_rejects_unpacked_and_mispacked_weights() {
    let err = |r: Result<Any>| match r {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e.message().to_string(),
    };
    // conv1d_bf16 with f32 weights, then with a packed tensor of the wrong shape.
    let mut x = Owned::new(vec![0.5f32; 3 * 8], &[1, 3, 8]);
    let mut o = Owned::new(vec![0.0f32; 4 * 8], &[1, 4, 8]);
    let ints = [1i64, 1, 1, 1, 1, 0, 3];
    let call = |views: &[TensorView]| {
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        err(conv1d_function().call_packed(&args))
    };
    let mut wf = Owned::new(vec![0.5f32; 36], &[4, 3, 3]);
    let m = call(&[x.view(), wf.view(), o.view()]);
    assert!(
        m.contains("conv1d_bf16: w: expected dtype bfloat16, got float32"),
        "{m}"
    );
    let mut wrong = pack("conv1d", 1, &[0.5; 24], &[4, 3, 2]);
    let m = call(&[x.view(), wrong.view(), o.view()]);
    assert!(
        m.contains("conv1d_bf16: w: expected shape [1, 1, 6, 8, 2], got [1, 1, 4, 8, 2]"),
        "{m}"
    );
    assert!(m.contains("pack_bf16"), "{m}");
    let mut ok = pack("conv1d", 1, &[0.5; 36], &[4, 3, 3]);
    let mut o9 = Owned::new(vec![0.0f32; 36], &[1, 4, 9]);
    let m = call(&[x.view(), ok.view(), o9.view()]);
    assert!(
        m.contains("conv1d_bf16: out: expected shape [1, 4, 8], got [1, 4, 9]"),
        "{m}"
    );
    let ints0 = [1i64, 1, 1, 1, 1, 0, 0];
    let mut args: Vec<AnyView> = ints0.iter().map(AnyView::from).collect();
    let views = [x.view(), ok.view(), o.view()];
    args.extend(views.iter().map(AnyView::from));
    let m = err(conv1d_function().call_packed(&args));
    assert!(
        m.contains("conv1d_bf16: kernel_size: expected a value in [1,"),
        "{m}"
    );
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::conv::testing::{conv_bad_scalars, ConvCase};
    use crate::tensor::fuzz::{check, Call, Spec, Value};
    let mut rng = Rng(0xbf16_0001);
    // Where bf16 is not native the inputs stay f32.
    let x_in = |v: Vec<f32>| if Bf16Gemm::native() { rounded(&v) } else { v };
    for case in 0..24 {
        let i = |v: usize| v as i64;
        let case = ConvCase::random(&mut rng, case % 2 == 1);
        let c = &case.c;
        let want = case.reference(&x_in(case.x.clone()), &rounded(&case.w));
        let kind = if case.transpose {
            "conv1d_transpose"
        } else {
            "conv1d"
        };
        let wp = packed(&mut rng, kind, c.groups, &case.w, &case.w_shape().map(i));
        let mut args = case.args(wp, &[("kernel_size", i(c.kernel))]);
        args.push((
            "out",
            Value::Tensor(Spec::output(&case.out_shape()).deciding()),
        ));
        let mut bad = conv_bad_scalars(c, case.transpose);
        bad.push(("kernel_size", Value::Int(0)));
        let call = Call {
            global: case.global(true),
            args,
            want: vec![("out", want)],
            rel: 2e-5,
            bad,
        };
        check(&call, &mut rng);
    }
}

/// (wall, process CPU) seconds: CPU time is what a busy, shared machine
/// does not inflate.
fn now() -> (f64, f64) {
    let cpu = cpu_seconds(PROCESS_CPU);
    (
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64(),
        cpu,
    )
}

/// GFLOP/s by wall clock and per CPU second (medians of 5), f32 against
/// bf16 at Kokoro's decoder shapes:
/// `cargo test --release -p tvm-ext bench_bf16_conv -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_bf16_conv() {
    println!(
        "bf16 native: {}, threads: {}",
        Bf16Gemm::native(),
        threads()
    );
    // (transpose, cin, cout, k, stride, dilation, L)
    let shapes: &[(bool, usize, usize, usize, usize, usize, usize)] = &[
        (false, 128, 128, 7, 1, 3, 19200),
        (false, 128, 128, 3, 1, 1, 19200),
        (false, 256, 256, 11, 1, 5, 3200),
        (false, 512, 512, 3, 1, 1, 320),
        (false, 1090, 1024, 3, 1, 1, 160),
        (true, 512, 256, 20, 10, 1, 320),
        (true, 256, 128, 12, 6, 1, 3200),
    ];
    for &(transpose, cin, cout, k, s, d, l) in shapes {
        let (p, op) = if transpose {
            ((k - s) / 2, 0)
        } else {
            (d * (k - 1) / 2, 0)
        };
        let c = Conv1dConfig {
            batch: 1,
            in_channels: cin,
            out_channels: cout,
            length: l,
            kernel: k,
            stride: s,
            pad_left: p,
            pad_right: p,
            dilation: d,
            groups: 1,
            output_padding: op,
        };
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        }
        .unwrap();
        let x: Vec<f32> = (0..cin * l)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let w: Vec<f32> = (0..cin * cout * k)
            .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let bias = vec![0.1f32; cout];
        let (kind, shape) = if transpose {
            (Kind::Conv1dTranspose, [cin, cout, k])
        } else {
            (Kind::Conv1d, [cout, cin, k])
        };
        let ps = packed_shape(kind, 1, &shape);
        let mut packed = vec![0u32; (ps[1] * ps[2] * ps[3]) as usize];
        if transpose {
            pack_b(cin, cout * k, |ci, j| w[ci * cout * k + j], &mut packed).unwrap();
        } else {
            pack_conv1d(&w, cin, k, &mut packed).unwrap();
        }
        let mut out = vec![0.0f32; cout * lout];
        let flops = 2.0 * (cin * cout * k) as f64 * if transpose { l } else { lout } as f64;
        let mut rate = |f: &mut dyn FnMut(&mut [f32])| {
            f(&mut out);
            let mut runs: Vec<(f64, f64)> = (0..5)
                .map(|_| {
                    let (w0, c0) = now();
                    f(&mut out);
                    let (w1, c1) = now();
                    (flops / (w1 - w0) / 1e9, flops / (c1 - c0) / 1e9)
                })
                .collect();
            runs.sort_by(|a, b| a.1.total_cmp(&b.1));
            let cpu = runs[2].1;
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            (runs[2].0, cpu)
        };
        let f32r = rate(&mut |o| {
            if transpose {
                conv1d_transpose_forward(&c, &x, &w, Some(&bias), o).unwrap()
            } else {
                conv1d_forward(&c, &x, &w, Some(&bias), o).unwrap()
            }
        });
        let bf16r = rate(&mut |o| {
            packed_forward::<Bf16Gemm>(&c, transpose, &x, &packed, Some(&bias), o).unwrap()
        });
        println!(
            "{} {cin}->{cout} k{k} s{s} d{d} L{l}: f32 {:.0} wall / {:.0} per CPU-s, bf16 {:.0} / {:.0} GFLOP/s",
            if transpose { "convT" } else { "conv1d" },
            f32r.0,
            f32r.1,
            bf16r.0,
            bf16r.1
        );
    }
}
