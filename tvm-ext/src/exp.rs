//! A vectorisable `exp`, shared by the LSTM's gates and the softmax: plain
//! arithmetic that LLVM vectorizes in whatever instruction set it is inlined into.

/// `e^x` for `x` in [-88, 88] (NaN stays NaN): Cody-Waite reduction and the
/// Cephes `expf` polynomial, about 2 ulp.
#[inline(always)]
pub(crate) fn exp_reduced(x: f32) -> f32 {
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
