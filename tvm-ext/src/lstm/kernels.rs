//! The recurrent mat-vec products and the cell update, per instruction set
//! (AVX-512, AVX2+FMA, NEON, portable), chosen at run time; the sets' own code
//! is in `x86.rs` and `arm.rs`.
use super::*;

#[cfg(target_arch = "x86_64")]
use super::x86::{avx2, avx512};

/// `out[j] = init[j] + W_hh h[j]` for each sequence j over the gate columns of
/// `pack` (whole panels of `W_hh^T`, `hidden` rows each); sequence j's gates go
/// to `out[j * stride ..]`.
pub(super) fn recurrent_matmul(
    isa: Isa,
    pack: &[f32],
    hidden: usize,
    init: &[&[f32]],
    h: &[&[f32]],
    out: &mut [f32],
    stride: usize,
) {
    let s = init.len();
    let width = pack.len() / hidden;
    assert!(
        width.is_multiple_of(NB)
            && pack.len() == width * hidden
            && h.len() == s
            && (1..=MAX_GROUP).contains(&s)
            && stride >= width
            && out.len() >= (s - 1) * stride + width
            && init.iter().all(|r| r.len() == width)
            && h.iter().all(|v| v.len() == hidden)
    );
    let panels = width / NB;
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Avx512Bf16 | Isa::AmxInt8 | Isa::AmxBf16 => {
            let w = pack.as_ptr();
            let o = out.as_mut_ptr();
            // SAFETY: avx512f was detected; lengths were asserted above.
            unsafe {
                match s {
                    1 => avx512::matvec1(w, hidden, panels, init[0].as_ptr(), h[0].as_ptr(), o),
                    2 => avx512::matvec::<2>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                    3 => avx512::matvec::<3>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                    _ => avx512::matvec::<4>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            for (j, o) in out.chunks_mut(stride).take(s).enumerate() {
                // SAFETY: avx2 and fma were detected; lengths were asserted above.
                unsafe {
                    avx2::matvec1(
                        pack.as_ptr(),
                        hidden,
                        panels,
                        init[j].as_ptr(),
                        h[j].as_ptr(),
                        o.as_mut_ptr(),
                    )
                }
            }
        }
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => {
            let w = pack.as_ptr();
            let o = out.as_mut_ptr();
            // SAFETY: NEON was detected; lengths were asserted above.
            unsafe {
                match s {
                    1 => arm::matvec::<1, 16>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                    2 => arm::matvec::<2, 8>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                    3 => arm::matvec::<3, 4>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                    _ => arm::matvec::<4, 4>(
                        w,
                        hidden,
                        panels,
                        ptrs(init),
                        ptrs(h),
                        out_ptrs(o, stride),
                    ),
                }
            }
        }
        Isa::Portable => {
            for (j, o) in out.chunks_mut(stride).take(s).enumerate() {
                portable_matvec1(pack, hidden, init[j], h[j], &mut o[..width]);
            }
        }
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn ptrs<const S: usize>(v: &[&[f32]]) -> [*const f32; S] {
    std::array::from_fn(|j| v[j].as_ptr())
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn out_ptrs<const S: usize>(o: *mut f32, stride: usize) -> [*mut f32; S] {
    std::array::from_fn(|j| o.wrapping_add(j * stride))
}

pub(super) fn portable_matvec1(
    pack: &[f32],
    hidden: usize,
    init: &[f32],
    h: &[f32],
    out: &mut [f32],
) {
    for ((panel, init), out) in pack
        .chunks_exact(hidden * NB)
        .zip(init.chunks_exact(NB))
        .zip(out.chunks_exact_mut(NB))
    {
        let mut acc = [0.0f32; NB];
        acc.copy_from_slice(init);
        for (row, &x) in panel.chunks_exact(NB).zip(h) {
            for (a, &w) in acc.iter_mut().zip(row) {
                *a += x * w;
            }
        }
        out.copy_from_slice(&acc);
    }
}

/// One LSTM cell update from pre-activation gates `[i | f | g | o]` (4H).
pub(super) fn cell(isa: Isa, g: &[f32], c: &mut [f32], h: &mut [f32]) {
    match isa {
        // SAFETY: the instruction sets were detected before `isa` was chosen.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Avx512Bf16 | Isa::AmxInt8 | Isa::AmxBf16 => unsafe {
            avx512::cell(g, c, h)
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::cell(g, c, h) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => unsafe { arm::cell(g, c, h) },
        Isa::Portable => cell_body(g, c, h),
    }
}
