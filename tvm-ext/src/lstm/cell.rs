//! The gate nonlinearities, on a vectorisable `exp` accurate to well under 1e-6.
use crate::exp::exp_reduced;

/// Written to vectorise in whatever instruction set it is inlined into.
#[inline(always)]
pub(super) fn cell_body(g: &[f32], c: &mut [f32], h: &mut [f32]) {
    let n = c.len();
    let h = &mut h[..n];
    let (gi, rest) = g[..4 * n].split_at(n);
    let (gf, rest) = rest.split_at(n);
    let (gg, go) = rest.split_at(n);
    for j in 0..n {
        let i = sigmoid(gi[j]);
        let f = sigmoid(gf[j]);
        let gv = tanh(gg[j]);
        let o = sigmoid(go[j]);
        let cn = f * c[j] + i * gv;
        c[j] = cn;
        h[j] = o * tanh(cn);
    }
}

/// Logistic sigmoid, absolute error below 1e-6.
#[inline(always)]
pub(super) fn sigmoid(x: f32) -> f32 {
    // Clamp -x to [-40, 40] (sigmoid is within 5e-18 of 0 or 1 beyond); NaN passes.
    let z = if x > 40.0 {
        -40.0
    } else if x < -40.0 {
        40.0
    } else {
        -x
    };
    1.0 / (1.0 + exp_reduced(z))
}

/// Hyperbolic tangent, absolute error below 1e-6.
#[inline(always)]
pub(super) fn tanh(x: f32) -> f32 {
    let z = if x > 20.0 {
        40.0
    } else if x < -20.0 {
        -40.0
    } else {
        2.0 * x
    };
    1.0 - 2.0 / (exp_reduced(z) + 1.0)
}
