use super::*;
use crate::tensor::testing::Rng;

/// The f64 definition of one row.
fn reference(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let e: Vec<f64> = x.iter().map(|&v| (v as f64 - max).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// Rows of every length around the lane count and the task size, with the
/// magnitudes attention scores have and the -3.4e38 a mask adds: each element
/// within 2e-6 of its value (relative) against f64, in every instruction set.
#[test]
fn every_instruction_set_matches_the_f64_softmax() {
    let mut rng = Rng(0x50f7);
    for &(rows, n) in &[
        (1usize, 1usize),
        (3, 15),
        (2, 16),
        (5, 17),
        (7, 311),
        (70, 510),
        (1, 20000),
    ] {
        let mut x: Vec<f32> = rng.vec(rows * n).iter().map(|v| v * 12.0).collect();
        for (i, v) in x.iter_mut().enumerate() {
            if i % 7 == 3 {
                *v = f32::MIN; // a masked position, as HF's attention mask writes it
            }
        }
        for isa in Isa::available() {
            let mut y = vec![f32::NAN; rows * n];
            softmax_rows(&x, &mut y, n, isa);
            for r in 0..rows {
                let want = reference(&x[r * n..][..n]);
                for (j, (&g, w)) in y[r * n..][..n].iter().zip(&want).enumerate() {
                    assert!(
                        (g as f64 - w).abs() <= 2e-6 * w + 1e-30,
                        "{isa:?} {rows}x{n}: row {r}, element {j}: got {g}, want {w}"
                    );
                }
            }
        }
    }
}

/// As torch: a row holding NaN is NaN, a row of only -inf is NaN, +inf too.
#[test]
fn rows_of_nan_or_infinities_are_nan_as_in_torch() {
    for isa in Isa::available() {
        for row in [
            vec![1.0, f32::NAN, 2.0],
            vec![f32::NEG_INFINITY; 20],
            vec![0.0, f32::INFINITY, 1.0],
        ] {
            let mut y = vec![0.0; row.len()];
            softmax_rows(&row, &mut y, row.len(), isa);
            assert!(y.iter().all(|v| v.is_nan()), "{isa:?} {row:?}: {y:?}");
        }
        // One -inf among finite values is an exact 0.
        let mut y = vec![0.0; 3];
        softmax_rows(&[0.0, f32::NEG_INFINITY, 0.0], &mut y, 3, isa);
        assert!(y[1] == 0.0 && (y[0] - 0.5).abs() < 1e-6, "{isa:?}: {y:?}");
    }
}

/// ALBERT's attention over a padded batch: a short item's scores are followed by
/// masked ones (float32's lowest added). Its probabilities must be the same bits
/// as the unpadded row's, and the masked ones exactly 0, at every length.
#[test]
fn a_row_padded_with_masked_scores_gives_the_same_bits() {
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
    };
    for isa in Isa::available() {
        for n in [1usize, 5, 15, 16, 17, 31, 40, 100] {
            let row: Vec<f32> = (0..n).map(|_| next()).collect();
            let mut alone = vec![0.0; n];
            softmax_rows(&row, &mut alone, n, isa);
            for padded_len in [n + 1, n + 7, n + 16, 3 * n + 5] {
                let mut padded = row.clone();
                padded.extend((n..padded_len).map(|_| f32::MIN + next()));
                let mut y = vec![f32::NAN; padded_len];
                softmax_rows(&padded, &mut y, padded_len, isa);
                let same = y[..n]
                    .iter()
                    .zip(&alone)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa:?}: {n} scores padded to {padded_len} changed");
                assert!(
                    y[n..].iter().all(|&v| v == 0.0),
                    "{isa:?}: masked scores not 0"
                );
            }
        }
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    let mut rng = Rng(0x50f7_0002);
    for _ in 0..30 {
        let shape: Vec<usize> = (0..1 + rng.below(3)).map(|_| size(&mut rng, 9)).collect();
        let n = *shape.last().unwrap();
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let x = rng.vec(shape.iter().product());
        let want: Vec<(f64, f64)> = if n == 0 {
            vec![]
        } else {
            x.chunks(n).flat_map(reference).map(|v| (v, 1.0)).collect()
        };
        let call = Call {
            global: "kokoro_tvm_ext.softmax",
            args: vec![
                ("x", Value::Tensor(Spec::input(x, &dims).any_rank())),
                ("out", Value::Tensor(Spec::output(&dims))),
            ],
            want: vec![("out", want)],
            rel: 2e-6,
            bad: vec![],
        };
        check(&call, &mut rng);
    }
}
