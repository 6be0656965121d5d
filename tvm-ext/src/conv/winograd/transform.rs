//! The transforms of F(m, r), from Toom-Cook interpolation in f64, and the
//! weights packed with them.
use tvm_ffi::{bail, Result, VALUE_ERROR};

/// The interpolation points besides infinity, in the order they are used.
/// Among sets of small fractions these gave the smallest measured rounding
/// for `A = 10` and `A = 12` (±3 instead of ±3/2 nearly doubled it).
const POINTS: [f64; 12] = [
    0.0,
    1.0,
    -1.0,
    2.0,
    -2.0,
    0.5,
    -0.5,
    1.5,
    -1.5,
    2.0 / 3.0,
    -2.0 / 3.0,
    1.0 / 3.0,
];

/// Outputs per tile for a kernel of `k` taps, `None` if there is no transform.
fn tile_outputs(k: usize) -> Option<usize> {
    match k {
        3 => Some(6),
        5 | 7 => Some(4),
        11 => Some(2),
        _ => None,
    }
}

/// The matrices of F(m, r), row-major: `y = AT (G g ⊙ BT d)` for a tile `d` of
/// `alpha` inputs and a kernel `g` of `r` taps.
#[derive(Clone, Debug)]
pub struct Transform {
    pub m: usize,
    pub r: usize,
    pub alpha: usize,
    /// `m x alpha`.
    pub(super) at: Vec<f32>,
    /// `alpha x alpha`.
    pub(super) bt: Vec<f32>,
    /// `alpha x r`, kept in f64 for packing.
    pub(super) g: Vec<f64>,
}

impl Transform {
    /// F(m, r) for kernels of `r` taps, `None` for an unsupported size.
    pub fn new(r: usize) -> Option<Self> {
        let m = tile_outputs(r)?;
        let alpha = m + r - 1;
        // Rows: the finite points, then infinity (the leading coefficient).
        let vandermonde = |n: usize| -> Vec<f64> {
            let mut v = vec![0.0; alpha * n];
            for (i, p) in POINTS[..alpha - 1].iter().enumerate() {
                for j in 0..n {
                    v[i * n + j] = p.powi(j as i32);
                }
            }
            v[alpha * n - 1] = 1.0;
            v
        };
        let (vm, c) = (vandermonde(m), invert(vandermonde(alpha), alpha));
        let at = (0..m * alpha)
            .map(|e| vm[(e % alpha) * m + e / alpha] as f32)
            .collect();
        let bt = (0..alpha * alpha)
            .map(|e| c[(e % alpha) * alpha + e / alpha] as f32)
            .collect();
        Some(Self {
            m,
            r,
            alpha,
            at,
            bt,
            g: vandermonde(r),
        })
    }

    /// [`Transform::new`], or an error naming `what` for an unsupported size.
    pub(super) fn for_taps(r: usize, what: &str) -> Result<Self> {
        match Self::new(r) {
            Some(tr) => Ok(tr),
            None => bail!(
                VALUE_ERROR,
                "{what}: kernels of {r} taps have no Winograd transform (3, 5, 7 or 11)"
            ),
        }
    }

    /// `u[a][o][c] = sum_k G[a][k] * w[o][c][k]` for `w` `[cout, cin, r]`.
    pub fn pack(&self, cout: usize, cin: usize, w: &[f32]) -> Vec<f32> {
        let (a_n, r) = (self.alpha, self.r);
        let mut u = vec![0.0f32; a_n * cout * cin];
        for a in 0..a_n {
            let g = &self.g[a * r..][..r];
            for (oc, dst) in u[a * cout * cin..][..cout * cin].iter_mut().enumerate() {
                let taps = &w[oc * r..][..r];
                *dst = g
                    .iter()
                    .zip(taps)
                    .map(|(gk, wk)| gk * *wk as f64)
                    .sum::<f64>() as f32;
            }
        }
        u
    }
}

/// The inverse of the `n x n` row-major matrix `a` (Gauss-Jordan with partial
/// pivoting; only ever called on the small, well-posed Vandermonde matrices above).
fn invert(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    let mut inv: Vec<f64> = (0..n * n).map(|e| (e / n == e % n) as u8 as f64).collect();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        for j in 0..n {
            a.swap(col * n + j, pivot * n + j);
            inv.swap(col * n + j, pivot * n + j);
        }
        let p = a[col * n + col];
        for j in 0..n {
            a[col * n + j] /= p;
            inv[col * n + j] /= p;
        }
        for i in (0..n).filter(|&i| i != col) {
            let f = a[i * n + col];
            if f != 0.0 {
                for j in 0..n {
                    a[i * n + j] -= f * a[col * n + j];
                    inv[i * n + j] -= f * inv[col * n + j];
                }
            }
        }
    }
    inv
}
