use super::*;
use crate::gemm::testing::{packed_with, reference_matmul};
use crate::tensor::testing::{assert_close_to, Rng};

fn packer() -> Function {
    pack_function()
}

/// The layout, element by element, against a hand-written 2 x 65 matrix: panel
/// 0 holds columns 0..64, panel 1 column 64 and zeros.
#[test]
fn the_packer_puts_each_column_in_its_panel_and_pads_with_zeros() {
    let (k, n) = (2usize, 65usize);
    let w: Vec<f32> = (0..k * n).map(|i| i as f32 + 1.0).collect();
    let packed = packed_with::<f32>(packer(), "matmul", 1, &w, &[k as i64, n as i64]);
    assert_eq!(packed.shape, vec![2, 2, 64]);
    let at = |p: usize, q: usize, c: usize| packed.data[(p * k + q) * NR + c];
    assert_eq!(at(0, 0, 0), 1.0); // W[0, 0]
    assert_eq!(at(0, 0, 63), 64.0); // W[0, 63]
    assert_eq!(at(0, 1, 5), 71.0); // W[1, 5] = 65 + 5 + 1
    assert_eq!(at(1, 0, 0), 65.0); // W[0, 64]
    assert_eq!(at(1, 1, 0), 130.0); // W[1, 64]
    assert!((1..NR).all(|c| at(1, 0, c) == 0.0 && at(1, 1, c) == 0.0));
}

#[test]
fn the_packer_refuses_convolution_weights_and_names_the_reason() {
    let Err(err) = crate::gemm::testing::call_packer(packer(), "conv1d", 1, &[0.0; 6], &[1, 2, 3])
    else {
        panic!("conv1d weights were packed");
    };
    assert!(err.contains("pack_f32: kind: only \"matmul\""), "{err}");
}

/// Against the f64 definition on shapes that cross every edge: partial panels
/// of columns, one row and many, K of one and long, with and without bias, on
/// one thread and two.
#[test]
fn the_product_on_the_panels_matches_the_f64_product() {
    for &(rows, k, n, has_bias) in &[
        (1usize, 1usize, 1usize, true),
        (4, 0, 70, false),
        (4, 0, 70, true),
        (5, 3, 64, false),
        (7, 129, 65, true),
        (50, 300, 200, false),
        (13, 768, 31, true),
    ] {
        let mut rng = Rng((rows * 131 + k * 7 + n) as u64);
        let (x, w, b) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
        let bias = has_bias.then_some(&b[..]);
        let want = reference_matmul((rows, k, n), &x, &w, bias);
        let packed = pack(k, n, &w);
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut out = vec![f32::NAN; rows * n];
            pool.install(|| gemm_panels(rows, k, n, &x, &packed, bias, &mut out))
                .unwrap();
            assert_close_to(
                &format!("{rows}x{k}x{n} bias={has_bias} threads={threads}"),
                &out,
                &want,
                1e-6,
            );
        }
    }
}

/// What batching relies on: each row's result is the same, bit for bit, with
/// other rows beside it or alone (K across blocks and within one).
#[test]
fn a_row_does_not_depend_on_the_rows_beside_it() {
    let mut rng = Rng(0x7a11);
    for &(k, n) in &[(768usize, 130usize), (2048, 64), (300, 70), (1025, 65)] {
        let (x, w, b) = (rng.vec(311 * k), rng.vec(k * n), rng.vec(n));
        let packed = pack(k, n, &w);
        let mut all = vec![0.0f32; 311 * n];
        gemm_panels(311, k, n, &x, &packed, Some(&b), &mut all).unwrap();
        for rows in [1usize, 3, 42, 64, 65, 200] {
            let mut some = vec![0.0f32; rows * n];
            gemm_panels(rows, k, n, &x[..rows * k], &packed, Some(&b), &mut some).unwrap();
            assert!(
                some.iter()
                    .zip(&all)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "k={k} n={n}: the first {rows} rows differ from the same rows among 311"
            );
        }
    }
}

#[test]
fn buffers_of_the_wrong_size_are_an_error_not_a_read_past_the_end() {
    let (rows, k, n) = (3usize, 4usize, 5usize);
    let packed = pack(k, n, &vec![1.0; k * n]);
    let mut out = vec![0.0; rows * n];
    let short_x = vec![1.0; rows * k - 1];
    let err = gemm_panels(rows, k, n, &short_x, &packed, None, &mut out).unwrap_err();
    assert!(err.message.contains("do not hold x 3x4"), "{}", err.message);
    let err = gemm_panels(
        rows,
        k,
        n,
        &vec![1.0; rows * k],
        &packed[1..],
        None,
        &mut out,
    )
    .unwrap_err();
    assert!(
        err.message.contains("packed weights 4x5"),
        "{}",
        err.message
    );
}

/// Per core, ALBERT's linear-layer shapes: the `gemm` crate on `[K, N]` weights
/// (which it packs on every call) against the same crate on the panels; the two
/// alternate on a one-thread pool, and each reports its fastest of 15 rounds
/// (the least disturbed by a busy host), in wall time.
/// `cargo test --release -p tvm-ext bench_gemm_panels -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_gemm_panels() {
    use crate::gemm::{sgemm, Layout};
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for &(m, k, n) in &[
        (50usize, 768usize, 768usize),
        (50, 768, 2048),
        (50, 2048, 768),
        (311, 768, 768),
        (311, 768, 2048),
        (311, 2048, 768),
    ] {
        let (x, w) = (vec![0.5f32; m * k], vec![0.25f32; k * n]);
        let packed = pack(k, n, &w);
        let mut out = vec![0.0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let reps = ((2e8 / flops) as usize).max(1);
        let mut best = [f64::MAX; 2];
        for round in 0..15 {
            for (which, b) in best.iter_mut().enumerate() {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    if which == 0 {
                        let (al, bl) = (Layout::row_major(0, k), Layout::row_major(0, n));
                        sgemm(
                            m,
                            n,
                            k,
                            &x,
                            al,
                            &w,
                            bl,
                            &mut out,
                            Layout::row_major(0, n),
                            false,
                            false,
                        )
                        .unwrap();
                    } else {
                        pool.install(|| gemm_panels(m, k, n, &x, &packed, None, &mut out))
                            .unwrap();
                    }
                }
                if round > 0 {
                    *b = b.min(t.elapsed().as_secs_f64() / reps as f64);
                }
            }
        }
        println!(
            "{m}x{k}x{n}: weights as they are {:.1}, on the panels {:.1} GFLOP/s per core ({:.2}x)",
            flops / best[0] / 1e9,
            flops / best[1] / 1e9,
            best[0] / best[1]
        );
    }
}
