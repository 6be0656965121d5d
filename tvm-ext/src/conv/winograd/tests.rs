use super::*;
use crate::tensor::testing::Rng;

#[test]
fn transforms_reproduce_a_direct_correlation_exactly_in_f64() {
    for r in [3, 5, 7, 11] {
        let tr = Transform::new(r).unwrap();
        let (m, a_n) = (tr.m, tr.alpha);
        // Every (output i, tap k, input j): sum_a AT[i][a] G[a][k] BT[a][j] = [j == i + k].
        for i in 0..m {
            for k in 0..r {
                for j in 0..a_n {
                    let term = |a: usize| {
                        tr.at[i * a_n + a] as f64 * tr.g[a * r + k] * tr.bt[a * a_n + j] as f64
                    };
                    let s: f64 = (0..a_n).map(term).sum();
                    // AT and BT are rounded to f32.
                    let tol = 1e-6 * (0..a_n).map(|a| term(a).abs()).sum::<f64>() + 1e-12;
                    let want = (j == i + k) as u8 as f64;
                    assert!((s - want).abs() <= tol, "F({m},{r}) i={i} k={k} j={j}: {s}");
                }
            }
        }
    }
}

use crate::conv::reference::reference_conv;
use crate::tensor::testing::assert_close_to;
use crate::tensor::testing::Owned;
use tvm_ffi::{TensorView, TYPE_ERROR};

fn config(
    batch: usize,
    cin: usize,
    cout: usize,
    length: usize,
    kernel: usize,
    pads: (usize, usize),
    dilation: usize,
) -> Conv1dConfig {
    Conv1dConfig {
        batch,
        in_channels: cin,
        out_channels: cout,
        length,
        kernel,
        stride: 1,
        pad_left: pads.0,
        pad_right: pads.1,
        dilation,
        groups: 1,
        output_padding: 0,
    }
}

/// Through the registered functions: pack, then convolve; `out` starts NaN.
fn call(c: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> tvm_ffi::Result<Vec<f32>> {
    let lout = c.conv_out_len().unwrap();
    let mut wt = Owned::new(
        w.to_vec(),
        &[c.out_channels as i64, c.in_channels as i64, c.kernel as i64],
    );
    let wv = wt.view();
    let packed = pack_function().call_packed(&[AnyView::from(&wv)])?;
    let u: Tensor = packed.try_into().unwrap();
    let mut xt = Owned::new(
        x.to_vec(),
        &[c.batch as i64, c.in_channels as i64, c.length as i64],
    );
    let mut bt = bias.map(|b| Owned::new(b.to_vec(), &[b.len() as i64]));
    let mut ot = Owned::new(
        vec![f32::NAN; c.batch * c.out_channels * lout],
        &[c.batch as i64, c.out_channels as i64, lout as i64],
    );
    let ints = [
        1,
        c.pad_left as i64,
        c.pad_right as i64,
        c.dilation as i64,
        1,
        bias.is_some() as i64,
        c.kernel as i64,
    ];
    let mut views = vec![xt.view()];
    if let Some(b) = bt.as_mut() {
        views.push(b.view());
    }
    views.push(ot.view());
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.push(AnyView::from(&views[0]));
    args.push(AnyView::from(&u));
    args.extend(views[1..].iter().map(AnyView::from));
    conv1d_function().call_packed(&args)?;
    drop(views);
    Ok(ot.data)
}

#[test]
fn matches_the_definition_on_odd_shapes_dilations_and_pads() {
    let mut rng = Rng(0x3170);
    // (batch, cin, cout, length, kernel, pads, dilation)
    let cases = [
        (1, 1, 1, 1, 3, (1, 1), 1), // length 1: one output, all padding but the centre
        (2, 5, 3, 17, 3, (1, 1), 1), // odd channels, a partial last tile
        (1, 19, 21, 40, 5, (2, 2), 1),
        (1, 7, 9, 50, 7, (9, 9), 3), // dilation: three phases
        (2, 3, 17, 61, 11, (25, 25), 5),
        (1, 6, 4, 13, 7, (0, 0), 1),     // no padding: 7 outputs
        (1, 4, 4, 30, 3, (0, 5), 2),     // lopsided pads
        (1, 33, 18, 300, 11, (5, 5), 1), // several jobs per phase
        (1, 3, 2, 3, 3, (4, 4), 5),      // one output: fewer phases than the dilation
        (1, 5, 6, 9, 3, (4, 4), 5),      // seven outputs: phases of two and of one
    ];
    for (batch, cin, cout, length, k, pads, d) in cases {
        let c = config(batch, cin, cout, length, k, pads, d);
        let x = rng.vec(batch * cin * length);
        let w = rng.vec(cout * cin * k);
        for bias in [None, Some(rng.vec(cout))] {
            let got = call(&c, &x, &w, bias.as_deref())
                .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
            // F(2,11)'s transforms scale terms up before they cancel.
            let tol = if k == 11 { 2e-4 } else { 2e-5 };
            assert_close_to(
                &format!("{c:?}"),
                &got,
                &reference_conv(&c, &x, &w, bias.as_deref()),
                tol,
            );
        }
    }
}

#[test]
fn every_instruction_set_and_block_size_matches_the_definition() {
    let mut rng = Rng(11);
    // (length, kernel, pads, dilation); the undilated ones split whole
    // vectors of tiles by lane permutes, the lopsided pads shift them.
    for (length, k, pads, d) in [
        (900, 7, (9, 9), 3),
        (1000, 3, (1, 1), 1),
        (777, 5, (2, 2), 1),
        (600, 11, (3, 7), 1),
    ] {
        let c = config(2, 8, 8, length, k, pads, d);
        let lout = c.conv_out_len().unwrap();
        let (x, w, bias) = (rng.vec(2 * 8 * length), rng.vec(8 * 8 * k), rng.vec(8));
        let tr = Transform::new(k).unwrap();
        let u = tr.pack(8, 8, &w);
        let want = reference_conv(&c, &x, &w, Some(&bias));
        // 4 KiB: the plan's floor of 64 tiles, several jobs per batch item.
        assert!(plan(&c, &tr, lout, 4096).len() >= 2 * 2);
        for isa in Isa::available() {
            for tile_bytes in [4096, TILE_BYTES] {
                let mut out = vec![f32::NAN; 2 * 8 * lout];
                run(
                    isa,
                    &c,
                    &tr,
                    lout,
                    &x,
                    &u,
                    Some(&bias),
                    &mut out,
                    tile_bytes,
                )
                .unwrap();
                let tol = if k == 11 { 2e-4 } else { 2e-5 };
                assert_close_to(&format!("{isa:?} {tile_bytes} {c:?}"), &out, &want, tol);
            }
        }
    }
}

#[test]
fn lane_splits_and_merges_are_transposes() {
    fn check<const M: usize>() {
        let flat: Vec<f32> = (0..LANES * M).map(|e| e as f32).collect();
        let want: [[f32; LANES]; M] =
            std::array::from_fn(|i| std::array::from_fn(|k| (k * M + i) as f32));
        let mut merged = vec![0.0; LANES * M];
        assert_eq!(lanes::split::<M, false>(&flat), want, "M={M}");
        lanes::merge::<M, false>(&want, 0.5, &mut merged);
        assert_eq!(
            merged,
            flat.iter().map(|v| v + 0.5).collect::<Vec<_>>(),
            "M={M}"
        );
        // The instruction set's own code: AVX-512 permutes, NEON interleaving loads and stores.
        #[cfg(target_arch = "x86_64")]
        let simd = Isa::available().contains(&Isa::Avx512);
        #[cfg(target_arch = "aarch64")]
        let simd = Isa::available().contains(&Isa::Neon);
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let simd = false;
        if simd {
            assert_eq!(lanes::split::<M, true>(&flat), want, "M={M}, SIMD");
            lanes::merge::<M, true>(&want, 0.5, &mut merged);
            assert_eq!(
                merged,
                flat.iter().map(|v| v + 0.5).collect::<Vec<_>>(),
                "M={M}, SIMD"
            );
        }
    }
    check::<2>();
    check::<4>();
    check::<6>();
}

#[test]
fn bad_calls_are_errors_that_name_the_problem() {
    let message =
        |r: tvm_ffi::Result<Vec<f32>>| r.err().map(|e| e.message().to_string()).unwrap_or_default();
    let (x, w) = (vec![0.0; 2 * 8], vec![0.0; 2 * 2 * 4]);
    let c = config(1, 2, 2, 8, 4, (0, 0), 1);
    assert!(
        message(call(&c, &x, &w, None)).contains("kernels of 4 taps have no Winograd transform")
    );

    // Weights not packed (torch's layout), a wrong dtype, stride 2.
    let mut xt = Owned::new(vec![0.0f32; 16], &[1, 2, 8]);
    let mut wt = Owned::new(vec![0.0f32; 12], &[2, 2, 3]);
    let mut ot = Owned::new(vec![0.0f32; 16], &[1, 2, 8]);
    let (xv, wv, ov) = (xt.view(), wt.view(), ot.view());
    let run = |ints: [i64; 7], w: &TensorView| {
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend([AnyView::from(&xv), AnyView::from(w), AnyView::from(&ov)]);
        conv1d_function().call_packed(&args).err().unwrap()
    };
    let e = run([1, 1, 1, 1, 1, 0, 3], &wv);
    assert!(
        e.message()
            .contains("weights packed by kokoro_tvm_ext.pack_winograd"),
        "{}",
        e.message()
    );
    let mut u = Owned::new(vec![0.0f32; 8 * 4], &[8, 2, 2]);
    let uv = u.view();
    let e = run([2, 1, 1, 1, 1, 0, 3], &uv);
    assert!(
        e.message()
            .contains("conv1d_winograd: stride: only 1 is supported, got 2"),
        "{}",
        e.message()
    );
    let mut half = Owned::new(vec![crate::tensor::Bf16(0); 8 * 4], &[8, 2, 2]);
    let hv = half.view();
    assert_eq!(run([1, 1, 1, 1, 1, 0, 3], &hv).kind(), TYPE_ERROR);
}

/// Direct vs Winograd on Kokoro's vocoder shapes (release build):
/// `cargo test -p tvm-ext --release winograd_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn winograd_speed() {
    use crate::conv::conv1d_forward;
    let mut rng = Rng(7);
    for (ch, len, k, d) in [
        (256, 2880, 3, 1),
        (256, 2880, 3, 5),
        (256, 2880, 7, 3),
        (256, 2880, 11, 1),
        (256, 2880, 11, 5),
        (128, 17280, 3, 1),
        (128, 17280, 7, 3),
        (128, 17280, 11, 5),
        (512, 600, 3, 1),
        (1024, 300, 3, 1),
        (1024, 100, 3, 1),
        (64, 5000, 7, 1),
    ] {
        let pad = d * (k - 1) / 2;
        let c = config(1, ch, ch, len, k, (pad, pad), d);
        let x = rng.vec(ch * len);
        let w = rng.vec(ch * ch * k);
        let bias = rng.vec(ch);
        let tr = Transform::new(k).unwrap();
        let u = tr.pack(ch, ch, &w);
        let mut o1 = vec![0.0; ch * len];
        let mut o2 = vec![0.0; ch * len];
        let time = |f: &mut dyn FnMut()| {
            f();
            let mut ts: Vec<f64> = (0..7)
                .map(|_| {
                    let t = std::time::Instant::now();
                    f();
                    t.elapsed().as_secs_f64()
                })
                .collect();
            ts.sort_by(f64::total_cmp);
            ts[3]
        };
        let td = time(&mut || conv1d_forward(&c, &x, &w, Some(&bias), &mut o1).unwrap());
        let tw =
            time(&mut || conv1d_winograd_forward(&c, &tr, &x, &u, Some(&bias), &mut o2).unwrap());
        let lout = c.conv_out_len().unwrap();
        let per_isa: Vec<String> = Isa::available()
            .into_iter()
            .filter(|isa| *isa != Isa::Portable)
            .map(|isa| {
                let t = time(&mut || {
                    run(isa, &c, &tr, lout, &x, &u, Some(&bias), &mut o2, TILE_BYTES).unwrap()
                });
                format!("{isa:?} {:7.2} ms", t * 1e3)
            })
            .collect();
        // The gather and transforms compiled per instruction set; the GEMMs are the crate's own choice.
        println!("    winograd, its loops for {}", per_isa.join(", "));
        let err = o1
            .iter()
            .zip(&o2)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt()
            / o1.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
        let gf = 2.0 * (ch * ch * k * len) as f64 / 1e9;
        println!("C={ch:5} L={len:6} K={k:2} d={d}: direct {:7.2} ms ({:5.0} GF/s) winograd {:7.2} ms ({:4.2}x) rel err {err:.1e}",
            td * 1e3, gf / td, tw * 1e3, td / tw);
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::conv::testing::{conv_bad_scalars, conv_scalars};
    use crate::tensor::fuzz::{call_returning, check, elements, size, Call, Spec, Value};
    use crate::tensor::testing::Rng;
    let mut rng = Rng(0x3196_0001);
    for _ in 0..24 {
        let k = [3, 5, 7, 11][rng.below(4)];
        let c = Conv1dConfig {
            batch: size(&mut rng, 2),
            in_channels: 1 + rng.below(5),
            out_channels: 1 + rng.below(5),
            length: size(&mut rng, 40),
            kernel: k,
            stride: 1,
            pad_left: rng.below(12),
            pad_right: rng.below(12),
            dilation: 1 + rng.below(3),
            groups: 1,
            output_padding: 0,
        };
        let Some(lout) = c.conv_out_len() else {
            continue;
        };
        let has_bias = rng.below(2) == 1;
        let (cin, cout) = (c.in_channels as i64, c.out_channels as i64);
        let w_shape = [cout, cin, k as i64];
        let (x, w, bias) = (
            rng.vec(c.batch * c.in_channels * c.length),
            rng.vec(c.out_channels * c.in_channels * k),
            rng.vec(c.out_channels),
        );
        let want = reference_conv(&c, &x, &w, has_bias.then_some(&bias[..]));
        // Pack through the registry, from a random layout of w.
        let pack = vec![("w", Value::Tensor(Spec::input(w.clone(), &w_shape)))];
        let u = call_returning("kokoro_tvm_ext.pack_winograd", &pack, &mut rng).unwrap();
        let u_shape = u.shape().to_vec();
        let pack_call = Call {
            global: "kokoro_tvm_ext.pack_winograd",
            args: pack,
            want: vec![],
            rel: 0.0,
            bad: vec![],
        };
        check(&pack_call, &mut rng);
        let mut args = conv_scalars(&c, false, has_bias, &[("kernel_size", k as i64)]);
        args.push((
            "x",
            Value::Tensor(Spec::input(x, &[c.batch as i64, cin, c.length as i64])),
        ));
        args.push((
            "w",
            Value::Tensor(Spec::derived(elements::<f32>(&u), &u_shape)),
        ));
        if has_bias {
            args.push(("bias", Value::Tensor(Spec::derived(bias, &[cout]))));
        }
        let out = [c.batch as i64, cout, lout as i64];
        args.push(("out", Value::Tensor(Spec::output(&out).deciding())));
        let mut bad = conv_bad_scalars(&c, false);
        bad.extend([
            ("stride", Value::Int(2)),
            ("groups", Value::Int(2)),
            ("kernel_size", Value::Int(4)),
            ("kernel_size", Value::Int(0)),
        ]);
        let call = Call {
            global: "kokoro_tvm_ext.conv1d_winograd",
            args,
            want: vec![("out", want)],
            rel: if k == 11 { 2e-4 } else { 2e-5 },
            bad,
        };
        check(&call, &mut rng);
    }
}
