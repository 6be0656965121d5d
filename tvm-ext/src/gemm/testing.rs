//! The f64 definition of a matrix product, which the tests of the GEMMs and
//! of their callers (the matmuls) compare to.

/// `x [rows, k] @ w [k, n] + bias` in f64: (value, sum of |terms|) per output.
pub fn reference_matmul(
    (rows, k, n): (usize, usize, usize),
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<(f64, f64)> {
    let mut want = vec![(0.0f64, 0.0f64); rows * n];
    for r in 0..rows {
        for j in 0..n {
            let b = bias.map_or(0.0, |b| b[j] as f64);
            let (mut v, mut mag) = (b, b.abs());
            for l in 0..k {
                let p = x[r * k + l] as f64 * w[l * n + j] as f64;
                v += p;
                mag += p.abs();
            }
            want[r * n + j] = (v, mag);
        }
    }
    want
}
