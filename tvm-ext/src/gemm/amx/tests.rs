use super::model::Model;
use super::*;
use crate::gemm::bf16;
use crate::gemm::int8::{gemm_walk_tiles, PackedA, Scales, Signs};
use crate::gemm::{Relayed, SharedMut};
use crate::isa::Isa;
use crate::tensor::testing::Rng;

/// One int8 GEMM through the tile loop: A `m x (4 * taps * per_tap)` packed in
/// MR-row panels, B read through a walk over a window of `quad_step`-word
/// rows (a stride-1 convolution's; `taps == 1` with `quad_step == NR` is a
/// plain packed B), and the product the test computes by hand.
struct Case {
    m: usize,
    n: usize,
    taps: usize,
    per_tap: usize,
    signs: Signs,
}

impl Case {
    fn walk(&self) -> Walk {
        let plain = self.taps == 1;
        let row = if plain {
            NR
        } else {
            self.n.div_ceil(NR) * NR + self.taps + 5
        };
        Walk {
            panel_step: if plain { self.per_tap * NR } else { NR },
            taps: self.taps,
            per_tap: self.per_tap,
            tap_step: 1,
            quad_step: row,
        }
    }

    /// Runs the loop on `T` and checks every element against the integer
    /// product, dequantized as the epilogue does (the same f32 operations).
    fn check<T: Tiles + Default>(&self, rng: &mut Rng, isa: Isa) {
        let (m, n, walk) = (self.m, self.n, self.walk());
        let kq = walk.taps * walk.per_tap;
        let a_signed = self.signs == Signs::WeightsA;
        let byte = |rng: &mut Rng, signed: bool| -> u8 {
            if signed {
                (rng.below(255) as i32 - 127) as i8 as u8
            } else {
                rng.below(256) as u8
            }
        };
        let word = |rng: &mut Rng, signed: bool| {
            u32::from_le_bytes(std::array::from_fn(|_| byte(rng, signed)))
        };
        let mut a = vec![0u32; m.div_ceil(MR) * kq * MR];
        for i in 0..m {
            for q in 0..kq {
                a[((i / MR) * kq + q) * MR + i % MR] = word(rng, a_signed);
            }
        }
        let b_len = (n.div_ceil(NR) - 1) * walk.panel_step + walk.reach();
        let b: Vec<u32> = (0..b_len).map(|_| word(rng, !a_signed)).collect();
        // B's quad q of column j, as the walk finds it.
        let b_at = |q: usize, j: usize| {
            let (t, cq) = (q / walk.per_tap, q % walk.per_tap);
            b[(j / NR) * walk.panel_step + t * walk.tap_step + cq * walk.quad_step + j % NR]
        };
        let sign = |w: u32, signed: bool| {
            w.to_le_bytes()
                .map(|x| if signed { x as i8 as i32 } else { x as i32 })
        };
        let row_scale: Vec<f32> = (0..m).map(|_| 1e-3 * (1.5 + rng.next())).collect();
        let col_scale: Vec<f32> = (0..n).map(|_| 1e-2 * (1.5 + rng.next())).collect();
        let row_off: Vec<i32> = (0..m).map(|_| rng.below(3000) as i32 - 1500).collect();
        let col_off: Vec<i32> = (0..n).map(|_| rng.below(256) as i32).collect();
        let bias: Vec<f32> = rng.vec(m);
        let ldc = n + 3;
        // A re-laid per call, then once for two calls that share it.
        let relayed = Relayed::new();
        for (accumulate, shared) in [
            (false, None),
            (true, Some(&relayed)),
            (false, Some(&relayed)),
        ] {
            let init: Vec<f32> = rng.vec(m * ldc);
            let mut c = init.clone();
            let s = Scales {
                row_scale: &row_scale,
                row_off: &row_off,
                col_scale: &col_scale,
                col_off: &col_off,
            };
            let pa = PackedA {
                data: &a,
                rows: m,
                k: 4 * kq,
            };
            unsafe {
                let out = SharedMut::new(&mut c);
                gemm_walk_tiles::<T>(
                    pa,
                    &b,
                    n,
                    walk,
                    self.signs,
                    s,
                    out,
                    0,
                    ldc,
                    accumulate,
                    Some(&bias),
                    true,
                    isa,
                    shared,
                )
                .unwrap();
            }
            for i in 0..m {
                for j in 0..ldc {
                    let got = c[i * ldc + j];
                    if j >= n {
                        assert_eq!(
                            got.to_bits(),
                            init[i * ldc + j].to_bits(),
                            "wrote past column {n}"
                        );
                        continue;
                    }
                    let mut sum = 0i32;
                    for q in 0..kq {
                        let (x, y) = (
                            sign(a[((i / MR) * kq + q) * MR + i % MR], a_signed),
                            sign(b_at(q, j), !a_signed),
                        );
                        sum += (0..4).map(|l| x[l] * y[l]).sum::<i32>();
                    }
                    let v = (sum - row_off[i] * col_off[j]) as f32 * (row_scale[i] * col_scale[j]);
                    let want = if accumulate {
                        init[i * ldc + j] + v
                    } else {
                        bias[i] + v
                    };
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{m}x{n}, {} taps of {} quads, {:?}, acc={accumulate}, [{i},{j}]: {got} vs {want}",
                        self.taps,
                        self.per_tap,
                        self.signs
                    );
                }
            }
        }
    }
}

/// Shapes at every edge: rows not a multiple of 8 or 32, columns not of 16 or
/// 32, a tap's words not a multiple of 16 (the stage), one word, many taps.
const CASES: &[(usize, usize, usize, usize)] = &[
    (1, 1, 1, 1),
    (32, 32, 1, 16),
    (33, 45, 1, 17),
    (7, 70, 3, 5),
    (40, 31, 7, 16),
    (70, 100, 3, 40),
    (16, 16, 11, 33),
];

fn check_int8<T: Tiles + Default>(seed: u64, isa: Isa) {
    let mut rng = Rng(seed);
    for &(m, n, taps, per_tap) in CASES {
        for signs in [Signs::WeightsA, Signs::WeightsB] {
            let case = Case {
                m,
                n,
                taps,
                per_tap,
                signs,
            };
            case.check::<T>(&mut rng, isa);
        }
    }
}

/// A bf16 GEMM through the tile loop against the f64 product of the same
/// bf16 values, within f32 accumulation's error (`k` products summed in an
/// order of the tiles' own), with and without accumulating into C.
fn check_bf16<T: Tiles + Default>(seed: u64) {
    let mut rng = Rng(seed);
    for &(m, n, _, k) in CASES {
        let k = 2 * k + 1; // odd: the last pair half empty
        let a: Vec<f32> = rng
            .vec(m * k)
            .iter()
            .map(|&v| bf16::round_bf16(v))
            .collect();
        let b: Vec<f32> = rng
            .vec(k * n)
            .iter()
            .map(|&v| bf16::round_bf16(v))
            .collect();
        let mut pa = vec![0u32; bf16::PackedA::len(m, k)];
        let mut pb = vec![0u32; bf16::PackedB::len(k, n)];
        bf16::pack_a(m, k, |i, l| a[i * k + l], &mut pa).unwrap();
        bf16::pack_b(k, n, |l, j| b[l * n + j], &mut pb).unwrap();
        let (pa, pb) = (
            bf16::PackedA {
                data: &pa,
                rows: m,
                k,
            },
            bf16::PackedB {
                data: &pb,
                cols: n,
                k,
            },
        );
        let relayed = Relayed::new();
        for (accumulate, shared) in [
            (false, None),
            (true, Some(&relayed)),
            (false, Some(&relayed)),
        ] {
            let init = rng.vec(m * n);
            let mut c = init.clone();
            unsafe {
                bf16::gemm_tiles::<T>(
                    pa,
                    pb,
                    SharedMut::new(&mut c),
                    0,
                    n,
                    accumulate,
                    true,
                    shared,
                )
                .unwrap();
            }
            for i in 0..m {
                for j in 0..n {
                    let (mut want, mut mag) = (
                        if accumulate {
                            init[i * n + j] as f64
                        } else {
                            0.0
                        },
                        0.0,
                    );
                    for l in 0..k {
                        let p = a[i * k + l] as f64 * b[l * n + j] as f64;
                        want += p;
                        mag += p.abs();
                    }
                    let got = c[i * n + j] as f64;
                    let tol = 1e-6 * (k as f64 + 2.0) * (mag + 1.0);
                    assert!(
                        (got - want).abs() <= tol,
                        "{m}x{k}x{n} acc={accumulate} [{i},{j}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// The loop on the plain-Rust model of the tile instructions, on any CPU: the
/// relaying of A, the stage, the edges and the int8 epilogue give the integer
/// product's bits; bf16 gives the product within f32 rounding.
#[test]
fn the_tile_loop_on_the_model_is_exact() {
    check_int8::<Model>(5, Isa::Portable);
    check_bf16::<Model>(8);
}

/// The same on the CPU's AMX instructions, where it has them.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_tile_loop_on_amx_is_exact() {
    if Isa::AmxInt8.detected() {
        check_int8::<super::x86::Hardware>(6, Isa::AmxInt8);
    }
    if Isa::AmxBf16.detected() {
        check_bf16::<super::x86::Hardware>(9);
    }
    if !Isa::AmxInt8.detected() && !Isa::AmxBf16.detected() {
        eprintln!("no AMX here (or KOKORO_TVM_EXT_NO_AMX): the model's test covers the loop");
    }
}

/// Each product against the model on the same random tiles (loads at a
/// stride, three steps): the int8 ones bit for bit (sums that wrap), bf16
/// within f32 rounding of the sums' magnitudes.
#[cfg(target_arch = "x86_64")]
#[test]
fn each_amx_instruction_computes_what_the_model_does() {
    let mut rng = Rng(7);
    for dot in [Dot::SignedUnsigned, Dot::UnsignedSigned, Dot::Bf16] {
        let isa = if dot == Dot::Bf16 {
            Isa::AmxBf16
        } else {
            Isa::AmxInt8
        };
        if !isa.detected() {
            continue;
        }
        // Bf16 pairs of values near 1 (random bits would be NaNs and infinities).
        let word = |rng: &mut Rng| match dot {
            Dot::Bf16 => {
                bf16::to_bf16(rng.next()) as u32 | (bf16::to_bf16(rng.next()) as u32) << 16
            }
            _ => u32::from_le_bytes(std::array::from_fn(|_| rng.below(256) as u8)),
        };
        let a: Vec<u32> = (0..2 * TILE_WORDS).map(|_| word(&mut rng)).collect();
        let b: Vec<u32> = (0..40 * TILE + TILE).map(|_| word(&mut rng)).collect();
        let mut got: Sums = [[0; NR]; ROWS];
        let mut want: Sums = [[0; NR]; ROWS];
        unsafe {
            let mut hw = super::x86::Hardware;
            let mut model = Model::default();
            for (tiles, out) in [
                (&mut hw as &mut dyn Tiles, &mut got),
                (&mut model, &mut want),
            ] {
                tiles.start();
                tiles.zero();
                for _ in 0..3 {
                    tiles.load_a(0, a.as_ptr());
                    tiles.load_a(1, a[TILE_WORDS..].as_ptr());
                    tiles.load_b(0, b.as_ptr(), 40);
                    tiles.load_b(1, b[TILE..].as_ptr(), 40);
                    tiles.multiply(dot);
                }
                tiles.store(out);
                tiles.finish();
            }
        }
        if dot == Dot::Bf16 {
            for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                let (g, w) = (f32::from_bits(*g), f32::from_bits(*w));
                assert!((g - w).abs() <= 1e-5 * 96.0, "{dot:?}: {g} vs {w}");
            }
        } else {
            assert_eq!(got, want, "{dot:?}");
        }
    }
}

/// What re-laying A into tiles costs against the product it feeds, at Kokoro's
/// bf16 convolution shapes (an A of `rows` x `kw` words, `n` columns).
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn timing_relay_against_product() {
    assert!(Isa::AmxBf16.detected());
    use std::time::Instant;
    for (rows, kw, n) in [
        (256usize, 896usize, 292usize),
        (512, 768, 150),
        (128, 384, 1024),
    ] {
        let a = vec![7u32; rows.div_ceil(MR) * kw * MR];
        let b = vec![3u32; kw * n.div_ceil(NR) * NR];
        let walk = Walk::panels(kw);
        let words = block_words(&walk);
        let mut dst = vec![0u32; rows.div_ceil(ROWS) * words];
        let t0 = Instant::now();
        for _ in 0..20 {
            dst.fill(0);
            for (i, d) in dst.chunks_mut(words).enumerate() {
                relay_a::<super::x86::Hardware>(&a, kw, rows.div_ceil(MR), i, &walk, d);
            }
        }
        let relay = t0.elapsed().as_secs_f64() / 20.0;
        let t0 = Instant::now();
        for _ in 0..20 {
            unsafe {
                gemm::<super::x86::Hardware>(
                    &a,
                    rows,
                    &b,
                    n,
                    walk,
                    Dot::Bf16,
                    false,
                    None,
                    |_, _, _| {},
                )
                .unwrap();
            }
        }
        let whole = t0.elapsed().as_secs_f64() / 20.0;
        println!(
            "{rows}x{kw}w x {n}: relay {:.3} ms, gemm with relay {:.3} ms",
            relay * 1e3,
            whole * 1e3
        );
    }
}
