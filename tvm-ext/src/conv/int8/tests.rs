use super::*;
use crate::conv::driver::{conv_tiles, packed_forward, transpose_tiles};
use crate::conv::packed::weight_shape;
use crate::conv::reference::{reference_conv, reference_transpose};
use crate::conv::Conv1dConfig;
use crate::conv::{conv1d_forward, conv1d_transpose_forward};
use crate::gemm::int8::packed_weights;
use crate::gemm::int8::testing::{assert_within, max_abs, pack};
use crate::precision::Precision;
use crate::tensor::testing::{cpu_seconds, Owned, Rng, PROCESS_CPU};
use tvm_ffi::AnyView;

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
    let &(b, cin, cout, l, k, s, pl, pr, d, g, op, _) = c;
    Conv1dConfig {
        batch: b,
        in_channels: cin,
        out_channels: cout,
        length: l,
        kernel: k,
        stride: s,
        pad_left: pl,
        pad_right: pr,
        dilation: d,
        groups: g,
        output_padding: op,
    }
}

/// Calls the registered kernel on `x` and weights packed by the registered packer.
fn call(transpose: bool, c: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
    let w_shape = if transpose {
        [c.in_channels, cout_g, c.kernel]
    } else {
        [c.out_channels, cin_g, c.kernel]
    };
    let lout = if transpose {
        c.transpose_out_len()
    } else {
        c.conv_out_len()
    }
    .unwrap();
    let kind = if transpose {
        "conv1d_transpose"
    } else {
        "conv1d"
    };
    let mut wp = pack(kind, c.groups as i64, w, &w_shape.map(|d| d as i64));
    let mut xt = Owned::new(
        x.to_vec(),
        &[c.batch as i64, c.in_channels as i64, c.length as i64],
    );
    let mut bt = bias.map(|b| Owned::new(b.to_vec(), &[b.len() as i64]));
    let n_out = c.batch * c.out_channels * lout;
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
    ot.data.clone()
}

/// The registered int8 kernel against the f64 definition on the f32 inputs,
/// within the quantization bound: per term `|w| dx + |x| dw + dx dw`, with
/// `dx = max|x| / 255` (half a step of a tile's range, which is at most `2
/// max|x|` wide) and `dw = max|w| / 254` (half a step of a channel's scale).
fn check_conv(transpose: bool, case: &Case) {
    let c = config(case);
    let mut rng = Rng((c.in_channels * 131 + c.length * 7 + c.kernel) as u64);
    let x = rng.vec(c.batch * c.in_channels * c.length);
    let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
    let w_len = if transpose {
        c.in_channels * cout_g * c.kernel
    } else {
        c.out_channels * cin_g * c.kernel
    };
    let w = rng.vec(w_len);
    let bias = case.11.then(|| rng.vec(c.out_channels));
    let reference = if transpose {
        reference_transpose
    } else {
        reference_conv
    };
    let want = reference(&c, &x, &w, bias.as_deref());
    let abs = |v: &[f32]| v.iter().map(|v| v.abs()).collect::<Vec<_>>();
    let ones = |n: usize| vec![1.0f32; n];
    let sum_w = reference(&c, &ones(x.len()), &abs(&w), None);
    let sum_x = reference(&c, &abs(&x), &ones(w.len()), None);
    let terms = reference(&c, &ones(x.len()), &ones(w.len()), None);
    let (dx, dw) = (max_abs(&x) as f64 / 255.0, max_abs(&w) as f64 / 254.0);
    let bound: Vec<f64> = (0..want.len())
        .map(|i| sum_w[i].0 * dx + sum_x[i].0 * dw + terms[i].0 * dx * dw)
        .collect();
    let got = call(transpose, &c, &x, &w, bias.as_deref());
    assert_within(&format!("{c:?}"), &got, &want, &bound);
    if !Int8Gemm::native() {
        return;
    }
    // Small tiles and weight blocks: every split of the tiling.
    let kind = weight_shape(&c, transpose);
    let w_shape: Vec<i64> = kind.1.iter().map(|&d| d as i64).collect();
    let wp = pack(
        if transpose {
            "conv1d_transpose"
        } else {
            "conv1d"
        },
        c.groups as i64,
        &w,
        &w_shape,
    );
    let (p, n) = crate::gemm::int8::packed_len(kind.0, c.groups, &kind.1);
    let words: Vec<u32> = wp
        .data
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]))
        .collect();
    assert_eq!(words.len(), c.groups * (p + 2 * n));
    let mut wt = Owned::new(wp.data.clone(), &wp.shape);
    let view = wt.view();
    let weights = packed_weights("test", &view, kind.0, c.groups, &kind.1).unwrap();
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
        let mut out = vec![f32::NAN; want.len()];
        let lout = out.len() / (c.batch * c.out_channels);
        if transpose {
            transpose_tiles::<Int8Gemm>(&c, lout, &x, &weights, bias.as_deref(), &mut out, tuning)
                .unwrap();
        } else {
            conv_tiles::<Int8Gemm>(
                &c,
                lout,
                &x,
                &weights,
                bias.as_deref(),
                &mut out,
                tuning.tile_bytes,
            )
            .unwrap();
        }
        assert_within(&format!("{c:?} {tuning:?}"), &out, &want, &bound);
    }
}

#[test]
fn conv1d_int8_matches_f32_within_the_quantization_bound() {
    let cases: &[Case] = &[
        // b, cin, cout, l, k, s, pl, pr, d, g, op, bias
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
        (2, 3, 5, 17, 3, 1, 1, 1, 1, 1, 0, true),
        (1, 20, 36, 50, 7, 1, 9, 9, 3, 1, 0, true),
        (2, 12, 18, 33, 5, 2, 3, 1, 2, 3, 0, true),
        (1, 17, 33, 100, 1, 1, 0, 0, 1, 1, 0, false),
        (1, 16, 18, 300, 11, 1, 25, 25, 5, 1, 0, true),
        (1, 22, 24, 61, 12, 6, 4, 3, 1, 1, 0, true),
        (1, 66, 70, 130, 3, 1, 1, 1, 1, 1, 0, true),
        // Kokoro's decoder: 1090 -> 64 channels (odd inner dimension), one frame.
        (1, 1090, 64, 1, 3, 1, 1, 1, 1, 1, 0, true),
    ];
    for case in cases {
        check_conv(false, case);
    }
}

#[test]
fn conv1d_transpose_int8_matches_f32_within_the_quantization_bound() {
    let cases: &[Case] = &[
        (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
        (2, 6, 4, 9, 3, 2, 1, 1, 1, 1, 1, true),
        (1, 20, 12, 30, 20, 10, 5, 5, 1, 1, 0, true),
        (1, 13, 9, 25, 12, 6, 3, 3, 1, 1, 0, false),
        (2, 12, 18, 11, 4, 3, 2, 0, 2, 3, 1, true),
        (1, 70, 33, 64, 3, 1, 1, 1, 1, 1, 0, true),
    ];
    for case in cases {
        check_conv(true, case);
    }
}

/// Weights packed for another shape, or not packed, are refused with the reason.
#[test]
fn conv1d_int8_rejects_unpacked_and_mispacked_weights() {
    let c = config(&(1, 4, 8, 10, 3, 1, 1, 1, 1, 1, 0, false));
    let x = vec![0.5f32; 40];
    let mut xt = Owned::new(x, &[1, 4, 10]);
    let mut ot = Owned::new(vec![0.0f32; 80], &[1, 8, 10]);
    let ints = [1i64, 1, 1, 1, 1, 0, 3];
    // Packed for 5 input channels.
    let mut wrong = pack("conv1d", 1, &[0.25; 8 * 5 * 3], &[8, 5, 3]);
    let mut f32_w = Owned::new(vec![0.25f32; 96], &[8, 4, 3]);
    for (w, want) in [(wrong.view(), "pack_int8"), (f32_w.view(), "dtype")] {
        let views = [xt.view(), w, ot.view()];
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        let err = conv1d_function()
            .call_packed(&args)
            .err()
            .expect("should fail");
        assert!(err.message().contains(want), "{}", err.message());
    }
    let _ = c;
}

/// Without the int8 instructions the kernels report int8 as not native and
/// compute the f32 convolution on the dequantized weights. Checked in this
/// process where the CPU lacks them (x86 without VNNI, aarch64 without
/// dotprod), else in a child process of this test binary with
/// `KOKORO_TVM_EXT_NO_VNNI=1` (the instruction set is read once per process;
/// under qemu-user the child runs in a new qemu with the same `QEMU_CPU`).
#[test]
fn without_vnni_the_f32_kernel_runs_on_dequantized_weights() {
    if Int8Gemm::native() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "conv::int8::tests::without_vnni_the_f32_kernel_runs_on_dequantized_weights",
                "--exact",
                "--test-threads=1",
            ])
            .env("KOKORO_TVM_EXT_NO_VNNI", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("1 passed"), "{text}");
        return;
    }
    let c = config(&(1, 10, 12, 40, 3, 1, 1, 1, 2, 1, 0, true));
    let mut rng = Rng(9);
    let (x, w, b) = (rng.vec(400), rng.vec(360), rng.vec(12));
    let got = call(false, &c, &x, &w, Some(&b));
    // The dequantized weights: per output channel, q * max|w| / 127.
    let deq: Vec<f32> = w
        .chunks_exact(30)
        .flat_map(|ch| {
            let s = max_abs(ch) / 127.0;
            ch.iter()
                .map(move |v| (v / s).round_ties_even() * s)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut want = vec![0.0f32; got.len()];
    conv1d_forward(&c, &x, &deq, Some(&b), &mut want).unwrap();
    assert_eq!(got, want);
    // conv1d_transpose: w [Cin, Cout, K], channel o spans every c and tap.
    let c = config(&(1, 12, 10, 40, 3, 2, 1, 1, 1, 1, 1, true));
    let (x, w, b) = (rng.vec(480), rng.vec(360), rng.vec(10));
    let got = call(true, &c, &x, &w, Some(&b));
    let s: Vec<f32> = (0..10)
        .map(|o| {
            let m = (0..12).flat_map(|ci| (0..3).map(move |t| (ci * 10 + o) * 3 + t));
            m.fold(0.0f32, |a, i| a.max(w[i].abs())) / 127.0
        })
        .collect();
    let deq: Vec<f32> = (0..360)
        .map(|i| {
            let so = s[(i / 3) % 10];
            (w[i] / so).round_ties_even() * so
        })
        .collect();
    let mut want = vec![0.0f32; got.len()];
    conv1d_transpose_forward(&c, &x, &deq, Some(&b), &mut want).unwrap();
    assert_eq!(got, want);
}

/// Per call shape of Kokoro's decoder (2 threads, process CPU time, medians of
/// interleaved runs): conv1d_int8 against the f32 conv1d the fp32 artifact
/// runs (the Winograd kernel where it takes the call).
#[test]
#[ignore]
fn bench_int8_conv() {
    use crate::conv::winograd;
    println!("int8 native: {}", Int8Gemm::native());
    // (cin, cout, length, kernel, dilation, stride, transpose)
    let shapes: &[(usize, usize, usize, usize, usize, usize, bool)] = &[
        (512, 512, 400, 3, 1, 1, false),
        (256, 256, 800, 3, 3, 1, false),
        (256, 256, 800, 7, 5, 1, false),
        (128, 128, 4800, 3, 1, 1, false),
        (128, 128, 4800, 11, 5, 1, false),
        (64, 64, 24000, 7, 1, 1, false),
        (1090, 1024, 200, 3, 1, 1, false),
        (1090, 512, 400, 3, 1, 1, false),
        (514, 512, 400, 3, 1, 1, false),
        (512, 256, 400, 20, 1, 10, true),
        (256, 128, 4000, 12, 1, 6, true),
    ];
    for &(cin, cout, l, k, d, s, transpose) in shapes {
        let pad = if transpose {
            (k - s) / 2
        } else {
            d * (k - 1) / 2
        };
        let c = Conv1dConfig {
            batch: 1,
            in_channels: cin,
            out_channels: cout,
            length: l,
            kernel: k,
            stride: s,
            pad_left: pad,
            pad_right: pad,
            dilation: d,
            groups: 1,
            output_padding: 0,
        };
        let mut rng = Rng(1);
        let x = rng.vec(cin * l);
        let w = rng.vec(cin * cout * k);
        let b = rng.vec(cout);
        let (kind, w_shape) = weight_shape(&c, transpose);
        let wp = pack(
            if transpose {
                "conv1d_transpose"
            } else {
                "conv1d"
            },
            1,
            &w,
            &w_shape.map(|d| d as i64),
        );
        let mut wt = Owned::new(wp.data.clone(), &wp.shape);
        let view = wt.view();
        let weights = packed_weights("bench", &view, kind, 1, &w_shape).unwrap();
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        }
        .unwrap();
        let wino = !transpose && s == 1 && [3, 5, 7, 11].contains(&k);
        let mut wt32 = Owned::new(w.clone(), &w_shape.map(|d| d as i64));
        let mut u = if wino {
            let view = wt32.view();
            let t: tvm_ffi::Tensor = winograd::pack_function()
                .call_packed(&[AnyView::from(&view)])
                .unwrap()
                .try_into()
                .unwrap();
            let data = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) };
            Owned::new(data.to_vec(), t.shape())
        } else {
            Owned::new(w.clone(), &w_shape.map(|d| d as i64))
        };
        let mut xt = Owned::new(x.clone(), &[1, cin as i64, l as i64]);
        let mut bt = Owned::new(b.clone(), &[cout as i64]);
        let mut ot = Owned::new(vec![0.0f32; cout * lout], &[1, cout as i64, lout as i64]);
        let mut ints = vec![s as i64, pad as i64, pad as i64];
        if transpose {
            ints.push(0);
        }
        ints.extend([d as i64, 1, 1]);
        if wino {
            ints.push(k as i64);
        }
        let f = if wino {
            winograd::conv1d_function()
        } else if transpose {
            crate::conv::transpose_function()
        } else {
            crate::conv::function()
        };
        let mut f32_run = || {
            let views = [xt.view(), u.view(), bt.view(), ot.view()];
            let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
            args.extend(views.iter().map(AnyView::from));
            f.call_packed(&args).unwrap();
        };
        let mut times = (Vec::new(), Vec::new());
        let mut out8 = vec![0.0f32; cout * lout];
        for rep in 0..12 {
            let t = cpu_seconds(PROCESS_CPU);
            f32_run();
            let t1 = cpu_seconds(PROCESS_CPU);
            packed_forward::<Int8Gemm>(&c, transpose, &x, &weights, Some(&b), &mut out8).unwrap();
            let t2 = cpu_seconds(PROCESS_CPU);
            if rep >= 2 {
                times.0.push(t1 - t);
                times.1.push(t2 - t1);
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2] * 1e3
        };
        let (f, q) = (med(&mut times.0), med(&mut times.1));
        println!(
            "{} cin={cin} cout={cout} L={l} K={k} d={d} s={s}: f32{} {f:.2} ms, int8 {q:.2} ms, x{:.2}",
            if transpose { "transpose" } else { "conv1d" },
            if wino { " (winograd)" } else { "" },
            f / q
        );
    }
}
