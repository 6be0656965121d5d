use super::*;

fn naive(m: usize, n: usize, k: usize, a: &[f32], al: Layout, b: &[f32], bl: Layout) -> Vec<f64> {
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for l in 0..k {
                s += a[al.offset + i * al.rs + l * al.cs] as f64
                    * b[bl.offset + l * bl.rs + j * bl.cs] as f64;
            }
            out[i * n + j] = s;
        }
    }
    out
}

#[test]
fn strided_layouts_and_accumulation() {
    for &(m, n, k, par) in &[
        (1, 1, 1, false),
        (7, 5, 3, true),
        (33, 17, 65, false),
        (70, 90, 40, true),
        (3, 4, 0, false),
    ] {
        let a: Vec<f32> = (0..2 + m * k * 2)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1)
            .collect();
        let b: Vec<f32> = (0..3 + k * n * 3)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1)
            .collect();
        // a transposed (column-major) at offset 2, b with a column stride of 3.
        let al = Layout {
            offset: 2,
            rs: 1,
            cs: m.max(1),
        };
        let bl = Layout {
            offset: 3,
            rs: 3 * n,
            cs: 3,
        };
        let want = naive(m, n, k, &a, al, &b, bl);
        let mut dst = vec![1.0f32; m * n + 4];
        sgemm(
            m,
            n,
            k,
            &a,
            al,
            &b,
            bl,
            &mut dst,
            Layout::row_major(4, n),
            true,
            par,
        )
        .unwrap();
        assert_eq!(&dst[..4], &[1.0; 4]);
        for (g, w) in dst[4..].iter().zip(&want) {
            assert!(
                (*g as f64 - (w + 1.0)).abs() < 1e-4,
                "{m}x{n}x{k}: {g} vs {}",
                w + 1.0
            );
        }
        sgemm(
            m,
            n,
            k,
            &a,
            al,
            &b,
            bl,
            &mut dst,
            Layout::row_major(4, n),
            false,
            par,
        )
        .unwrap();
        for (g, w) in dst[4..].iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-4);
        }
    }
}

#[test]
fn out_of_bounds_layouts_are_refused() {
    let a = vec![0.0f32; 6];
    let b = vec![0.0f32; 6];
    let mut d = vec![0.0f32; 4];
    let err = sgemm(
        2,
        2,
        3,
        &a,
        Layout::row_major(0, 3),
        &b,
        Layout::row_major(0, 2),
        &mut d,
        Layout::row_major(1, 2),
        false,
        false,
    )
    .unwrap_err();
    assert!(err.message.contains("destination"), "{}", err.message);
    let err = sgemm(
        2,
        2,
        3,
        &a,
        Layout::row_major(1, 3),
        &b,
        Layout::row_major(0, 2),
        &mut d,
        Layout::row_major(0, 2),
        false,
        false,
    )
    .unwrap_err();
    assert!(err.message.contains("left"), "{}", err.message);
    let mut d = vec![0.0f32; 8];
    let err = sgemm(
        2,
        2,
        3,
        &a,
        Layout::row_major(0, 3),
        &b,
        Layout::row_major(0, 2),
        &mut d,
        Layout::row_major(0, 1),
        false,
        false,
    )
    .unwrap_err();
    assert!(err.message.contains("aliases"), "{}", err.message);
}

/// `cargo test --release -p tvm-ext bench_gemm -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_gemm() {
    for &(m, n, k) in &[
        (512usize, 512usize, 512usize),
        (128, 256, 896),
        (2560, 208, 1024),
        (64, 512, 512),
        (64, 768, 768),
        (64, 3072, 768),
        (64, 768, 3072),
        (510, 768, 128),
    ] {
        let a = vec![0.5f32; m * k];
        let b = vec![0.25f32; k * n];
        let mut c = vec![0.0f32; m * n];
        for par in [false, true] {
            let flops = 2.0 * (m * n * k) as f64;
            let reps = ((4e9 / flops) as usize).max(3);
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    sgemm(
                        m,
                        n,
                        k,
                        &a,
                        Layout::row_major(0, k),
                        &b,
                        Layout::row_major(0, n),
                        &mut c,
                        Layout::row_major(0, n),
                        false,
                        par,
                    )
                    .unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            let mut best2 = f64::MAX;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    unsafe {
                        matrixmultiply::sgemm(
                            m,
                            k,
                            n,
                            1.0,
                            a.as_ptr(),
                            k as isize,
                            1,
                            b.as_ptr(),
                            n as isize,
                            1,
                            0.0,
                            c.as_mut_ptr(),
                            n as isize,
                            1,
                        );
                    }
                }
                best2 = best2.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            println!(
                "{m}x{n}x{k} par={par}: gemm {:.1} GFLOP/s, matrixmultiply {:.1} GFLOP/s",
                flops / best / 1e9,
                flops / best2 / 1e9
            );
        }
    }
}

/// ALBERT's attention scores `q @ k^T` (both operands run along K) for a short
/// item alone and inside a padded batch: each score must be the same bits at
/// every size, also where the crate would switch to dot products across K.
#[test]
fn a_product_gives_the_same_bits_at_every_size() {
    let k = 64;
    let value = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 250.0;
    let q: Vec<f32> = (0..40 * k).map(value).collect();
    let kt: Vec<f32> = (0..40 * k).map(|i| value(i + 17)).collect();
    let scores = |t: usize| {
        let mut out = vec![0.0f32; t * t];
        sgemm(
            t,
            t,
            k,
            &q,
            Layout::row_major(0, k),
            &kt,
            Layout {
                offset: 0,
                rs: 1,
                cs: k,
            },
            &mut out,
            Layout::row_major(0, t),
            false,
            false,
        )
        .unwrap();
        out
    };
    for small in [3usize, 5, 10, 13, 15, 16] {
        let alone = scores(small);
        for padded in [small + 1, 17, 20, 33, 40] {
            let big = scores(padded);
            for i in 0..small {
                for j in 0..small {
                    assert_eq!(
                        alone[i * small + j].to_bits(),
                        big[i * padded + j].to_bits(),
                        "{small}x{small} inside {padded}x{padded}: ({i}, {j})"
                    );
                }
            }
        }
    }
}
