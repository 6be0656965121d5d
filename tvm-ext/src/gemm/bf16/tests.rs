use super::testing::{packed, rounded};
use super::*;
use crate::gemm::testing::reference_matmul;
use crate::gemm::testing::{call_packer, f32_gemm_rate, rate_per_core, BENCH_SHAPES};
use crate::tensor::testing::Rng;

/// Every micro-kernel of bf16's rows of the precision table this CPU runs.
fn isas() -> Vec<Isa> {
    table::runnable("bf16", false)
        .into_iter()
        .map(|(_, isa)| isa)
        .collect()
}

#[test]
fn conversion_rounds_to_nearest_even() {
    assert_eq!(to_bf16(1.0), 0x3f80);
    assert_eq!(to_bf16(-2.0), 0xc000);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even.
    assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
    assert_eq!(to_bf16(1.0 + 1.5 / 256.0), 0x3f81);
    assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
    assert_eq!(to_bf16(f32::MAX), 0x7f80); // rounds up to infinity
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert_eq!(to_bf16(-1e-40), 0x8000); // denormal → signed zero
    assert_eq!(round_bf16(1.2345), 1.234375);
}

/// The vector conversion agrees with [`to_bf16`] on every kind of value.
#[test]
fn packing_matches_scalar_conversion() {
    let mut rng = Rng(7);
    let mut special = vec![
        0.0f32,
        -0.0,
        1e-40,
        -3e-39,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::INFINITY,
        -1.0,
    ];
    special.extend((0..200).map(|i| f32::from_bits((i as u32).wrapping_mul(0x9e37_79b9))));
    special.retain(|v| !v.is_nan());
    for cols in [1usize, 5, 16, 17, 32, 33, 70, special.len()] {
        let lo: Vec<f32> = (0..cols)
            .map(|i| special[i % special.len()] * if i % 3 == 0 { rng.next() } else { 1.0 })
            .collect();
        let hi: Vec<f32> = (0..cols)
            .map(|i| special[(i * 7 + 3) % special.len()])
            .collect();
        let kp = 3;
        for q in 0..kp {
            for h in [None, Some(&hi[..])] {
                for width in [MR, NR] {
                    let mut got = vec![0xdead_beefu32; cols.div_ceil(width) * kp * width];
                    let mut want = got.clone();
                    pack_pair(&lo, h, q, kp, width, &mut got).unwrap();
                    for (p, panel) in want.chunks_exact_mut(kp * width).enumerate() {
                        for c in 0..width {
                            let j = p * width + c;
                            panel[q * width + c] = if j < cols {
                                to_bf16(lo[j]) as u32
                                    | (to_bf16(h.map_or(0.0, |h| h[j])) as u32) << 16
                            } else {
                                0
                            };
                        }
                    }
                    assert_eq!(got, want, "cols {cols} q {q} width {width}");
                }
            }
        }
    }
}

#[test]
fn gemm_matches_f64_reference_at_odd_shapes() {
    let shapes = [
        (1usize, 1usize, 1usize),
        (1, 1, 2),
        (1, 33, 3),
        (8, 32, 2),
        (7, 31, 5),
        (9, 17, 64),
        (17, 65, 33),
        (64, 40, 513),
        (3, 100, 600),
        (70, 3, 19),
        (5, 7, 0),
    ];
    for (m, n, k) in shapes {
        let mut rng = Rng((m * 1000 + n * 10 + k) as u64);
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let want = reference_matmul((m, k, n), &rounded(&a), &rounded(&b), None);
        let mut pa = vec![0u32; PackedA::len(m, k)];
        let mut pb = vec![0u32; PackedB::len(k, n)];
        pack_a(m, k, |i, l| a[i * k + l], &mut pa).unwrap();
        pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
        let (mut ua, mut ub) = (vec![f32::NAN; m * k], vec![f32::NAN; k * n]);
        unpack_a_into(&pa, m, k, &mut ua);
        unpack_b_into(&pb, k, n, &mut ub);
        assert_eq!(ua, a.iter().map(|&v| round_bf16(v)).collect::<Vec<_>>());
        assert_eq!(ub, b.iter().map(|&v| round_bf16(v)).collect::<Vec<_>>());
        let pa = PackedA {
            data: &pa,
            rows: m,
            k,
        };
        let pb = PackedB {
            data: &pb,
            cols: n,
            k,
        };
        for isa in isas() {
            for (accumulate, parallel) in [(false, false), (true, true), (false, true)] {
                // C inside a larger buffer: offset 3, ldc n + 2; the rest stays 7.
                let ldc = n + 2;
                let mut c = vec![7.0f32; 3 + m * ldc + 2];
                let shared = SharedMut::new(&mut c);
                unsafe {
                    gemm_bf16_shared(pa, pb, shared, 3, ldc, accumulate, parallel, isa, None)
                }
                .unwrap();
                for i in 0..m {
                    for j in 0..ldc {
                        let got = c[3 + i * ldc + j] as f64;
                        if j >= n {
                            assert_eq!(got, 7.0, "{isa:?} {m}x{n}x{k}: wrote outside the block");
                            continue;
                        }
                        let (v, mag) = want[i * n + j];
                        let v = if accumulate { v + 7.0 } else { v };
                        // Only the f32 accumulation rounds: a few ulps of the magnitudes.
                        let tol = 1e-6 * (mag + 7.0);
                        assert!(
                            (got - v).abs() <= tol,
                            "{isa:?} {m}x{n}x{k} acc={accumulate}: [{i},{j}] got {got}, want {v}"
                        );
                    }
                }
                assert_eq!(&c[..3], &[7.0; 3]);
                assert_eq!(&c[3 + m * ldc..], &[7.0; 2]);
            }
        }
    }
}

#[test]
fn sub_panels_and_bad_operands() {
    let (k, n) = (5, 70);
    let mut rng = Rng(3);
    let b = rng.vec(k * n);
    let mut pb = vec![0u32; PackedB::len(k, n)];
    pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
    let whole = PackedB {
        data: &pb,
        cols: n,
        k,
    };
    let tail = whole.panels(1, 3).unwrap();
    assert_eq!(tail.cols, n - NR);
    assert!(whole.panels(2, 4).is_err());
    let a = vec![1.0f32; k];
    let mut pa = vec![0u32; PackedA::len(1, k)];
    pack_a(1, k, |_, l| a[l], &mut pa).unwrap();
    let pa = PackedA {
        data: &pa,
        rows: 1,
        k,
    };
    let mut c = vec![0.0f32; n];
    gemm_bf16(pa, tail, &mut c, 0, n, false, false).unwrap();
    for j in 0..n - NR {
        let want: f32 = (0..k).map(|l| round_bf16(b[l * n + NR + j])).sum();
        assert!((c[j] - want).abs() < 1e-5);
    }
    // A destination too small, mismatched k, a short packed buffer.
    let err = gemm_bf16(pa, tail, &mut c[..10], 0, n, false, false).unwrap_err();
    assert!(err.message.contains("outside"), "{}", err.message);
    let short = PackedB {
        data: &pb[..10],
        cols: n,
        k,
    };
    assert!(gemm_bf16(pa, short, &mut c, 0, n, false, false).is_err());
    let wrong_k = PackedB {
        data: &pb,
        cols: n,
        k: k + 1,
    };
    assert!(gemm_bf16(pa, wrong_k, &mut c, 0, n, false, false)
        .unwrap_err()
        .message
        .contains("inner"));
    assert!(pack_a(2, 3, |_, _| 0.0, &mut [0u32; 3]).is_err());
}

#[test]
fn packer_rejects_bad_arguments() {
    let w = vec![0.5f32; 24];
    let err = |kind: &str, groups: i64| {
        call_packer(pack_function(), kind, groups, &w, &[4, 3, 2])
            .err()
            .expect("the call should fail")
    };
    let m = err("conv2d", 1);
    assert!(m.contains("pack_bf16: kind: expected \"conv1d\""), "{m}");
    let m = err("conv1d", 3);
    assert!(
        m.contains("pack_bf16: groups: 3 does not divide the 4 channels"),
        "{m}"
    );
    let m = err("matmul", 1);
    assert!(m.contains("pack_bf16: w: expected rank 2"), "{m}");
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, Call, Data};
    let mut rng = Rng(0xbf16_0003);
    // The packer from random layouts of w (and its mutations, see `packed`):
    // unpacking gives w rounded to bf16.
    for case in 0..12 {
        let groups = 1 + rng.below(3);
        let (kind, groups, shape) = match case % 3 {
            0 => {
                let shape = [
                    groups * (1 + rng.below(9)),
                    1 + rng.below(5),
                    1 + rng.below(5),
                ];
                ("conv1d", groups, shape.to_vec())
            }
            1 => {
                let shape = [
                    groups * (1 + rng.below(5)),
                    1 + rng.below(9),
                    1 + rng.below(5),
                ];
                ("conv1d_transpose", groups, shape.to_vec())
            }
            _ => ("matmul", 1, vec![1 + rng.below(9), 1 + rng.below(40)]),
        };
        let w = rng.vec(shape.iter().product());
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let Data::Bf16(halves) = packed(&mut rng, kind, groups, &w, &dims).data else {
            unreachable!("the packer gives bfloat16")
        };
        let pairs: Vec<u32> = halves
            .chunks_exact(2)
            .map(|p| p[0].0 as u32 | (p[1].0 as u32) << 16)
            .collect();
        let mut got = vec![f32::NAN; w.len()];
        let kind_of = match kind {
            "conv1d" => Kind::Conv1d,
            "conv1d_transpose" => Kind::Conv1dTranspose,
            _ => Kind::Matmul,
        };
        Bf16Gemm::unpack_f32(&pairs, kind_of, groups, &shape, &mut got);
        assert_eq!(got, rounded(&w), "{kind} {shape:?}, {groups} groups");
    }
    // bf16_native takes no arguments.
    let call = Call {
        global: "kokoro_tvm_ext.bf16_native",
        args: vec![],
        want: vec![],
        rel: 0.0,
        bad: vec![],
    };
    check(&call, &mut rng);
}

/// Single-threaded GFLOP/s per CPU second (robust on a shared machine):
/// `cargo test --release -p tvm-ext bench_gemm_bf16 -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_gemm_bf16() {
    println!("isa of this process: {:?}", isa());
    // (M = Cout, K = Cin*K, N = tile columns) at Kokoro's conv shapes.
    for (m, k, n) in BENCH_SHAPES {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0.0f32; m * n];
        let mut pa = vec![0u32; PackedA::len(m, k)];
        let mut pb = vec![0u32; PackedB::len(k, n)];
        pack_a(m, k, |i, l| a[i * k + l], &mut pa).unwrap();
        pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
        let flops = 2.0 * (m * n * k) as f64;
        let f32_rate = f32_gemm_rate(m, k, n);
        let time = |f: &mut dyn FnMut()| rate_per_core(flops, f);
        let mut line = format!("{m}x{k}x{n}: f32 gemm {f32_rate:.1}");
        for which in isas() {
            let (pa, pb) = (
                PackedA {
                    data: &pa,
                    rows: m,
                    k,
                },
                PackedB {
                    data: &pb,
                    cols: n,
                    k,
                },
            );
            let rate = time(&mut || unsafe {
                gemm_bf16_shared(
                    pa,
                    pb,
                    SharedMut::new(&mut c),
                    0,
                    n,
                    false,
                    false,
                    which,
                    None,
                )
                .unwrap()
            });
            line += &format!(", bf16 {which:?} {rate:.1}");
        }
        // Packing the im2col tile (B) each call, as conv1d does.
        let mut lo = vec![0.0f32; n];
        let kp = pairs(k);
        let pack_rate = time(&mut || {
            for q in 0..kp {
                lo[0] = q as f32;
                pack_pair(&lo, Some(&b[..n]), q, kp, NR, &mut pb).unwrap();
            }
        });
        println!(
            "{line} GFLOP/s per core; packing B costs {:.1}% of the f32 time",
            100.0 * f32_rate / pack_rate
        );
    }
}

/// scripts/test-aarch64.sh names the inner loop each emulated CPU must pick
/// (`NeonBf16` = BFDOT on `max`, else `Portable`), so a run that silently fell
/// back fails.
#[test]
fn picks_the_inner_loop_the_emulated_run_expects() {
    let Ok(want) = std::env::var("TVM_EXT_EXPECT_BF16") else {
        return; // a native run: whatever this CPU has is right
    };
    assert_eq!(format!("{:?}", isa()), want);
}
