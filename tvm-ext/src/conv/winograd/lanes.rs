//! Between `LANES * M` consecutive values (`flat[k * M + i]`) and `M` rows of
//! `LANES` (`rows[i][k]`): how the tiles' inputs are split by position in the
//! tile and their outputs merged back. Scalar loops, or (`SIMD`) `M * M`
//! masked lane permutes with AVX-512, or NEON's interleaving loads and stores
//! (`ld2`/`ld4`, `ld3` and `uzp` for `M` = 6): a scalar loop here cost as much
//! as the GEMMs at 128 channels.
use super::LANES;

/// `rows[i][k] = flat[k * M + i]` for `flat` of `LANES * M` values.
#[inline(always)]
pub(super) fn split<const M: usize, const SIMD: bool>(flat: &[f32]) -> [[f32; LANES]; M] {
    let flat = &flat[..LANES * M];
    #[cfg(target_arch = "x86_64")]
    if SIMD {
        // SAFETY: `SIMD` is only set in code compiled for AVX-512; `flat` has `LANES * M` values.
        return unsafe { super::x86::split::<M>(flat) };
    }
    #[cfg(target_arch = "aarch64")]
    if SIMD {
        // SAFETY: NEON is aarch64's baseline; `flat` has `LANES * M` values.
        if let Some(rows) = unsafe { super::arm::split::<M>(flat) } {
            return rows;
        }
    }
    std::array::from_fn(|i| std::array::from_fn(|k| flat[k * M + i]))
}

/// `flat[k * M + i] = rows[i][k] + add` for `flat` of `LANES * M` values.
#[inline(always)]
pub(super) fn merge<const M: usize, const SIMD: bool>(
    rows: &[[f32; LANES]; M],
    add: f32,
    flat: &mut [f32],
) {
    let flat = &mut flat[..LANES * M];
    #[cfg(target_arch = "x86_64")]
    if SIMD {
        // SAFETY: as in `split`.
        return unsafe { super::x86::merge::<M>(rows, add, flat) };
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as in `split`.
    if SIMD && unsafe { super::arm::merge::<M>(rows, add, flat) } {
        return;
    }
    for (e, v) in flat.iter_mut().enumerate() {
        *v = rows[e % M][e / M] + add;
    }
}
