use super::testing::pack;
use super::*;
use crate::gemm::testing::{call_packer, f32_gemm_rate, rate_per_core, BENCH_SHAPES};
use crate::precision::with_f32_weights;
use crate::tensor::testing::Rng;

/// Every inner loop this CPU runs (on aarch64 with i8mm: SDOT and USMMLA).
/// Best last, as int8's rows of the precision table that this CPU runs.
fn isas() -> Vec<Isa> {
    let rows = table::runnable("int8", false);
    rows.into_iter().rev().map(|(_, isa)| isa).collect()
}

/// Random bytes: u8 activations or s8 weights in -127..=127.
fn bytes(rng: &mut Rng, n: usize, unsigned: bool) -> Vec<i32> {
    (0..n)
        .map(|_| {
            if unsigned {
                rng.below(256) as i32
            } else {
                rng.below(255) as i32 - 127
            }
        })
        .collect()
}

/// The naive packing of an integer matrix `src(i, l)` (`n x k`) in panels of `width`.
fn pack_ints(width: usize, n: usize, k: usize, src: impl Fn(usize, usize) -> i32) -> Vec<u32> {
    let kq = quads(k);
    let mut out = vec![0u32; n.div_ceil(width) * kq * width];
    for i in 0..n {
        for l in 0..k {
            let at = ((i / width) * kq + l / 4) * width + i % width;
            out[at] |= ((src(i, l) as u8) as u32) << (8 * (l % 4));
        }
    }
    out
}

/// The int8 GEMM against the naive integer product, both sign layouts, every
/// inner loop, edge sizes (not multiples of the tile or of 4, one row, one
/// column): exact, bit for bit (the dequantization's f32 operations are the
/// same as the test's).
#[test]
fn gemm_is_exact_against_the_integer_reference() {
    let mut rng = Rng(11);
    for &(m, k, n) in &[
        (1usize, 1usize, 1usize),
        (1, 7, 33),
        (8, 4, 32),
        (7, 5, 31),
        (9, 131, 70),
        (17, 64, 1),
        (33, 1090 * 3, 45),
    ] {
        for signs in [Signs::WeightsA, Signs::WeightsB] {
            let a_u8 = signs == Signs::WeightsB;
            let a = bytes(&mut rng, m * k, a_u8);
            let b = bytes(&mut rng, k * n, !a_u8);
            let pa = pack_ints(MR, m, k, |i, l| a[i * k + l]);
            let pb = pack_ints(NR, n, k, |j, l| b[l * n + j]);
            let row_scale: Vec<f32> = (0..m).map(|_| 1e-3 * (1.5 + rng.next())).collect();
            let col_scale: Vec<f32> = (0..n).map(|_| 1e-2 * (1.5 + rng.next())).collect();
            // As the callers pass them (`Scales`): the weights' sums over K,
            // the activations' zero points.
            let row_sums: Vec<i32> = (0..m).map(|i| a[i * k..][..k].iter().sum()).collect();
            let col_sums: Vec<i32> = (0..n).map(|j| (0..k).map(|l| b[l * n + j]).sum()).collect();
            let (row_off, col_off): (Vec<i32>, Vec<i32>) = if a_u8 {
                ((0..m).map(|_| rng.below(256) as i32).collect(), col_sums)
            } else {
                (row_sums, (0..n).map(|_| rng.below(256) as i32).collect())
            };
            let init: Vec<f32> = rng.vec(m * n);
            for isa in isas() {
                for accumulate in [false, true] {
                    for parallel in [false, true] {
                        let mut c = init.clone();
                        let s = Scales {
                            row_scale: &row_scale,
                            row_off: &row_off,
                            col_scale: &col_scale,
                            col_off: &col_off,
                        };
                        unsafe {
                            gemm_int8(
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
                                signs,
                                s,
                                SharedMut::new(&mut c),
                                0,
                                n,
                                accumulate,
                                parallel,
                                isa,
                            )
                            .unwrap()
                        };
                        for i in 0..m {
                            for j in 0..n {
                                let sum: i32 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                                let v = (sum - row_off[i] * col_off[j]) as f32
                                    * (row_scale[i] * col_scale[j]);
                                let want = if accumulate { init[i * n + j] + v } else { v };
                                assert_eq!(
                                    c[i * n + j].to_bits(),
                                    want.to_bits(),
                                    "{m}x{k}x{n} {signs:?} {isa:?} acc={accumulate} [{i},{j}]"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A block of C inside a larger buffer: only the block is written.
#[test]
fn gemm_writes_only_its_block() {
    let (m, k, n, ldc) = (5usize, 9usize, 20usize, 37usize);
    let pa = pack_ints(MR, m, k, |_, _| 1);
    let pb = pack_ints(NR, n, k, |_, _| 2);
    let ones = vec![1.0f32; m.max(n)];
    // Zero points 0, the weights' sums 2k.
    let (zeros, sums) = (vec![0i32; m], vec![2 * k as i32; n]);
    for isa in isas() {
        let mut c = vec![-1.0f32; 3 + m * ldc];
        let s = Scales {
            row_scale: &ones,
            row_off: &zeros,
            col_scale: &ones,
            col_off: &sums,
        };
        unsafe {
            let (a, b) = (
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
            let sh = SharedMut::new(&mut c);
            gemm_int8(a, b, Signs::WeightsB, s, sh, 3, ldc, false, true, isa).unwrap();
        }
        for (i, v) in c.iter().enumerate() {
            let inside = i >= 3 && (i - 3) % ldc < n;
            let want = if inside { 2.0 * k as f32 } else { -1.0 };
            assert_eq!(*v, want, "{isa:?} [{i}]");
        }
    }
}

/// Zero quantizes exactly; every value comes back within half a step; the
/// vector packing equals the scalar definition.
#[test]
fn activations_quantize_within_half_a_step_and_pack_as_defined() {
    let mut rng = Rng(5);
    for (lo, hi) in [
        (-1.0f32, 3.0f32),
        (0.5, 2.0),
        (-4.0, -0.25),
        (0.0, 0.0),
        (-1e-3, 1e-3),
    ] {
        let q = Affine::new(lo, hi);
        assert_eq!(q.quantize(0.0) as i32, q.zero, "{lo}..{hi}");
        for _ in 0..1000 {
            let x = lo.min(0.0) + (rng.next() + 1.0) * 0.5 * (hi.max(0.0) - lo.min(0.0));
            let back = q.scale * (q.quantize(x) as i32 - q.zero) as f32;
            assert!(
                (back - x).abs() <= 0.5001 * q.scale,
                "{lo}..{hi}: {x} -> {back}"
            );
        }
    }
    let q = Affine::new(-2.0, 1.0);
    for (n, width, kq) in [(1usize, NR, 3usize), (37, NR, 2), (16, MR, 1), (45, MR, 4)] {
        let rows: Vec<Vec<f32>> = (0..3).map(|_| rng.vec(n)).collect();
        let quad = [
            Some(&rows[0][..]),
            None,
            Some(&rows[1][..]),
            Some(&rows[2][..]),
        ];
        for qi in 0..kq {
            let mut got = vec![7u32; n.div_ceil(width) * kq * width];
            let mut want = got.clone();
            pack_quad(quad, n, q, qi, kq, width, &mut got).unwrap();
            for j in 0..n.div_ceil(width) * width {
                let b = quad.map(|r| match r {
                    Some(r) if j < n => q.quantize(r[j]),
                    _ => 0,
                });
                want[((j / width) * kq + qi) * width + j % width] = u32::from_le_bytes(b);
            }
            assert_eq!(got, want, "n={n} width={width} quad {qi}");
        }
    }
    assert!(pack_quad([None; 4], 4, q, 2, 2, NR, &mut [0u32; 64]).is_err());
}

/// `pack_int8`: per output channel, max |w| / 127; values and sums as defined;
/// a tensor already on one int8 grid (a dequantized int8 export) comes back exactly.
#[test]
fn packer_quantizes_per_channel_and_keeps_an_int8_grid() {
    let mut rng = Rng(3);
    // conv1d [Cout=3, Cin=2, K=3]: channel o scaled by o + 1.
    let w: Vec<f32> = (0..18).map(|i| rng.next() * ((i / 6) + 1) as f32).collect();
    let t = pack("conv1d", 1, &w, &[3, 2, 3]);
    let words: Vec<u32> = t
        .data
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]))
        .collect();
    let (p, n) = packed_len(Kind::Conv1d, 1, &[3, 2, 3]);
    assert_eq!((t.shape.clone(), n), (vec![1, (p + 2 * n) as i64, 4], 3));
    for o in 0..3 {
        let ch = &w[o * 6..][..6];
        let s = f32::from_bits(words[p + o]);
        assert_eq!(s, ch.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0);
        let qs: Vec<i32> = ch
            .iter()
            .map(|v| (v / s).round_ties_even() as i32)
            .collect();
        assert_eq!(
            words[p + n + o] as i32,
            qs.iter().sum::<i32>(),
            "sum of channel {o}"
        );
        // Tap-major, the 2 channels padded to a quad: w[o, c, tap] is byte
        // c of quad tap, the padding channels' bytes zero.
        for tap in 0..3 {
            let word = words[tap * MR + o];
            for c in 0..4 {
                let want = if c < 2 { qs[c * 3 + tap] } else { 0 };
                let got = (word >> (8 * c)) as u8 as i8 as i32;
                assert_eq!(got, want, "w[{o}, {c}, {tap}]");
            }
        }
    }
    // And back to torch's layout where int8 is not native.
    let g = Weights {
        words: std::borrow::Cow::Owned(words.clone()),
        p,
        n,
    };
    with_f32_weights::<Int8Gemm, _>(&g, Kind::Conv1d, 1, &[3, 2, 3], |back| {
        for (i, (b, v)) in back.iter().zip(&w).enumerate() {
            let s = f32::from_bits(words[p + i / 6]);
            assert!((b - v).abs() <= 0.5 * s * 1.0001, "[{i}]: {b} vs {v}");
        }
    });
    // One grid for the whole tensor (per-tensor int8), channels of different ranges.
    let step = 0.013f32;
    let w: Vec<f32> = (0..64 * 12)
        .map(|i| step * (rng.below(241) as i32 - 120).clamp(-60 - i % 60, 120) as f32)
        .map(|v| if v == 0.0 { step } else { v })
        .collect();
    // As in the int8 export: no weight at 127 steps, so max |w| / 127 is not the step.
    assert!(w.iter().all(|v| v.abs() < 126.5 * step));
    let t = pack("matmul", 1, &w, &[12, 64]);
    let words: Vec<u32> = t
        .data
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0] as u8, b[1] as u8, b[2] as u8, b[3] as u8]))
        .collect();
    let (p, n) = packed_len(Kind::Matmul, 1, &[12, 64]);
    let g = Weights {
        words: std::borrow::Cow::Owned(words),
        p,
        n,
    };
    with_f32_weights::<Int8Gemm, _>(&g, Kind::Matmul, 1, &[12, 64], |back| {
        for (i, (b, v)) in back.iter().zip(&w).enumerate() {
            assert!((b - v).abs() <= 1e-6 * v.abs(), "[{i}]: {b} vs {v}");
        }
    });
}

/// Bad packer arguments are value errors naming the argument.
#[test]
fn packer_rejects_bad_arguments() {
    let call = |kind: &str, groups: i64, shape: &[i64]| -> String {
        let n = shape.iter().product::<i64>() as usize;
        call_packer(pack_function(), kind, groups, &vec![0.5f32; n], shape)
            .err()
            .unwrap_or_default()
    };
    assert!(call("conv2d", 1, &[4, 2, 3]).contains("kind"));
    assert!(call("conv1d", 3, &[4, 2, 3]).contains("groups"));
    assert!(call("matmul", 2, &[4, 2]).contains("groups"));
    assert!(call("conv1d", 2, &[4, 2, 3]).is_empty());
}

/// `KOKORO_TVM_EXT_NO_VNNI` hides the int8 instructions (VNNI; dotprod,
/// i8mm); the switch reads "0" and "" as unset.
#[test]
fn the_switch_hides_the_int8_instructions() {
    let hidden: Vec<Isa> = table::runnable("int8", true)
        .into_iter()
        .map(|(_, isa)| isa)
        .collect();
    assert_eq!(hidden, [Isa::Portable]);
    assert_eq!(Int8Gemm::native(), isa() != Isa::Portable);
    let var = std::env::var("KOKORO_TVM_EXT_NO_VNNI");
    let hiding = var.is_ok_and(|v| !v.is_empty() && v != "0");
    assert_eq!(isa(), table::runnable("int8", hiding)[0].1);
}

/// scripts/test-aarch64.sh names the inner loop each emulated CPU must pick
/// (`Portable` on a Cortex-A72, `Dotprod` = SDOT on a Cortex-A76, `I8mm` =
/// USMMLA on `max`), so a run that silently fell back fails.
#[test]
fn picks_the_inner_loop_the_emulated_run_expects() {
    let Ok(want) = std::env::var("TVM_EXT_EXPECT_INT8") else {
        return; // a native run: whatever this CPU has is right
    };
    assert_eq!(format!("{:?}", isa()), want, "available: {:?}", isas());
}

/// Per call shape of Kokoro's decoder: GFLOP/s of the int8 GEMM (VNNI) against
/// the f32 GEMM crate, one core, packed operands (the im2col packing of the
/// activations is measured with the convolutions, see conv/int8/tests.rs).
#[test]
#[ignore]
fn bench_gemm_int8() {
    println!("isa of this process: {:?}", isa());
    for (m, k, n) in BENCH_SHAPES {
        let pa = pack_ints(MR, m, k, |_, _| 3);
        let pb = pack_ints(NR, n, k, |_, _| 100);
        let (rs, cs) = (vec![1.0f32; m], vec![1.0f32; n]);
        let (ro, co) = (vec![0i32; m], vec![0i32; n]);
        let mut c = vec![0.0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let f32_rate = f32_gemm_rate(m, k, n);
        let mut line = format!("{m}x{k}x{n}: f32 gemm {f32_rate:.1}");
        for which in isas().into_iter().rev() {
            let s = Scales {
                row_scale: &rs,
                row_off: &ro,
                col_scale: &cs,
                col_off: &co,
            };
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
            let rate = rate_per_core(flops, &mut || unsafe {
                let sh = SharedMut::new(&mut c);
                gemm_int8(pa, pb, Signs::WeightsA, s, sh, 0, n, false, false, which).unwrap()
            });
            line += &format!(", int8 {which:?} {rate:.1}");
            if which == Isa::Portable {
                break;
            }
        }
        println!("{line} GOP/s per core");
    }
}

/// The activations' range, on every length around the vector loop's blocks
/// (64 and 16 values), with NaNs, signed zeros and one extreme value placed
/// anywhere, against the plain fold (NaNs skipped, the range holding 0).
#[test]
fn min_max_is_the_range_of_the_values_and_zero() {
    let mut rng = Rng(71);
    for n in (0..200).chain([1000, 4097]) {
        for case in 0..4 {
            let mut v: Vec<f32> = rng.vec(n).iter().map(|x| x * 3.0 + 0.5).collect();
            if n > 0 {
                let at = rng.below(n);
                v[at] = match case {
                    0 => f32::NAN,
                    1 => -0.0,
                    2 => -1e30,
                    _ => 7e20,
                };
            }
            let (mut lo, mut hi) = (0.0f32, 0.0f32);
            for &x in &v {
                if x < lo {
                    lo = x;
                }
                if x > hi {
                    hi = x;
                }
            }
            let (got_lo, got_hi) = min_max(&v);
            // A zero's sign is the instruction set's (NEON's min keeps -0.0, AVX's gives 0.0); the scale and
            // zero point made from the range are the same either way, so zeros compare as one value.
            let bits = |x: f32| (x + 0.0).to_bits();
            assert_eq!(
                (bits(got_lo), bits(got_hi)),
                (bits(lo), bits(hi)),
                "n {n} case {case}"
            );
        }
    }
}
