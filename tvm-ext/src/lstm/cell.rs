//! The gate nonlinearities: a vectorisable `exp` accurate to well under 1e-6.

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

/// `e^x` for `x` in [-88, 88] (NaN stays NaN): Cody-Waite reduction and the
/// Cephes `expf` polynomial, about 2 ulp.
#[inline(always)]
pub(super) fn exp_reduced(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 1.5 * 2^23: adding it rounds to an integer kept in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits((ni.wrapping_add(127) << 23) as u32)
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
