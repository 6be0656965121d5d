//! A float32 sine whose fast path compiles to straight-line vector code, for the
//! kernels' element-wise loops (Snake's `sin(alpha * x)`), where libm's scalar
//! `sinf` call stops the loop from vectorizing.
//!
//! - [`sin_fast`] is branch-free: no calls, no tables, only mul/add/round/bit
//!   operations, so a loop over it auto-vectorizes (16 lanes with AVX-512).
//!   It is valid for `|x| <= FAST_LIMIT` and returns garbage beyond.
//! - [`needs_slow_path`] says which lanes are beyond that; [`sin_slow`] handles
//!   them (and NaN, +-inf, which give NaN) through the f64 libm sine, correctly
//!   reduced for any argument. [`sin`] combines both for scalar callers.
//!
//! Accuracy of the fast path: at most 2 ulp against the exact sine for every
//! float32 with `|x| <= FAST_LIMIT` (checked exhaustively by an ignored test,
//! sampled by the regular ones; measured max 1.57 ulp at x = 2100.902), and
//! `sin(-x) = -sin(x)` bit for bit, so `sin(-0.0) = -0.0`.
//!
//! How: `j = round(x * 2/pi)`, `r = x - j*pi/2` by Cody-Waite reduction with
//! pi/2 split into four float32 parts. The first three have 8, 11 and 11
//! significant bits, so `j * P1..P3` are exact for `|j| < 2^13`, the first two
//! subtractions are exact, the third's rounding error is recovered (TwoSum) and
//! the fourth part carries the next 24 bits: `r` is rounded once, at the end.
//! Three parts are not enough: float32s below 1e4 come within 4.2e-9 of a
//! multiple of pi/2 (x = 252.89821), where a 3-part constant's error of ~1e-15
//! per unit of `j` costs thousands of ulp; and rounding `r` twice costs up to
//! 2.3 ulp where `sin r` drops below a power of two. Then `sin x` is `+-sin r`
//! or `+-cos r` by the quadrant `j mod 4`, each a minimax polynomial on
//! `|r| <= pi/4 + 0.002` (the slack covers `j` rounded from the float32 product
//! `x * 2/pi`); our own fit, relative error 7.9e-9 (sin) and 2.2e-10 (cos)
//! before float32 rounding.

/// The largest `|x|` the fast path handles: `|j| <= 7640 < 2^13`.
pub const FAST_LIMIT: f32 = 12000.0;

const TWO_OVER_PI: f32 = 0.636_619_75;
// pi/2 = P1 + P2 + P3 + P4 + O(1e-19); P1..P3 have 8, 11, 11 significant bits.
const P1: f32 = 201.0 / 128.0;
const P2: f32 = 2029.0 / 4_194_304.0; // 2^22
const P3: f32 = 1297.0 / 17_179_869_184.0; // 2^34
const P4: f32 = 2.563_344e-12;
// Adding 1.5 * 2^23 rounds |v| < 2^22 to the nearest integer (ties to even),
// which then sits in the low mantissa bits.
const ROUNDER: f32 = 12_582_912.0;
// sin r = r + r^3 (S1 + r^2 (S2 + r^2 S3)), cos r = 1 - r^2/2 + r^4 (C1 + r^2 (C2 + r^2 C3)).
const S1: f32 = -0.166_666_54;
const S2: f32 = 0.008_332_149;
const S3: f32 = -0.000_195_136_28;
const C1: f32 = 0.041_666_646;
const C2: f32 = -0.001_388_73;
const C3: f32 = 2.443_126e-5;

/// Whether `x` is outside the fast path's range (or NaN).
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must count as outside
pub fn needs_slow_path(x: f32) -> bool {
    !(x.abs() <= FAST_LIMIT)
}

/// `sin x` for `|x| <= FAST_LIMIT`, branch-free; garbage beyond (see the module doc).
#[inline(always)]
pub fn sin_fast(x: f32) -> f32 {
    // sin is odd: work on |x|, give the sign back at the end (so sin(-0) = -0).
    let ax = x.abs();
    let k = ax * TWO_OVER_PI + ROUNDER;
    let quadrant = k.to_bits(); // low two bits: j mod 4
    let j = k - ROUNDER;
    // x - j*P1 - j*P2 is exact; the next step's rounding error is recovered
    // (TwoSum) so that r = x - j*pi/2 is rounded once, at the end.
    let r2 = (ax - j * P1) - j * P2;
    let jp3 = j * P3; // exact
    let hi = r2 - jp3;
    let back = hi - r2;
    let lo = (r2 - (hi - back)) - (jp3 + back);
    let r = hi + (lo - j * P4);
    let z = r * r;
    let s = r + r * z * (S1 + z * (S2 + z * S3));
    let c = 1.0 - 0.5 * z + z * z * (C1 + z * (C2 + z * C3));
    let v = if quadrant & 1 == 0 { s } else { c };
    let sign = (x.to_bits() & 0x8000_0000) ^ ((quadrant & 2) << 30);
    f32::from_bits(v.to_bits() ^ sign)
}

/// `sin x` through the f64 libm sine: any argument, NaN for NaN and +-inf.
#[cold]
pub fn sin_slow(x: f32) -> f32 {
    (x as f64).sin() as f32
}

/// `sin x` for any float32.
#[inline]
pub fn sin(x: f32) -> f32 {
    if needs_slow_path(x) {
        sin_slow(x)
    } else {
        sin_fast(x)
    }
}

#[cfg(test)]
mod tests;
