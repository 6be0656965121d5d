//! Test data the matmul tests share.

/// `n` values in `[-1, 1]`, a different sequence per `seed`.
pub fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104729) % 2001) as f32 / 1000.0) - 1.0)
        .collect()
}
