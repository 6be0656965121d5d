//! The bf16 GEMM behind the `precision="bf16"` kernels (`conv/bf16/`,
//! `matmul/bf16/`):
//! `C (f32) (+)= A × B` with both operands rounded to bf16 and fp32 accumulation.
//!
//! Operands are packed in pairs along the inner dimension K, the layout
//! `VDPBF16PS` reads: one `u32` holds `(v[2q], v[2q + 1])`, the even element in
//! its low half. With `kp = ceil(k / 2)` and zeros past every edge:
//!
//! - [`PackedA`], the broadcast operand (`rows x k`), in panels of [`MR`] rows:
//!   `data[(panel * kp + q) * MR + r] = (A[panel*MR + r, 2q], A[panel*MR + r, 2q+1])`.
//! - [`PackedB`], the vector operand (`k x cols`), in panels of [`NR`] columns:
//!   `data[(panel * kp + q) * NR + c] = (B[2q, panel*NR + c], B[2q+1, panel*NR + c])`.
//!
//! Either operand can be the prepacked weights: conv1d multiplies packed weights
//! (A) by its im2col tile (B, packed per call); the transposed convolution and
//! matmul multiply their packed input (A) by packed weights (B).
//!
//! The inner loop, an `MR x NR` register tile, uses `VDPBF16PS` where the CPU
//! has AVX512-BF16 (16 zmm accumulators), on aarch64 `BFDOT` where it has
//! bf16 (in 8 x 8 quarters), checked once per process (see [`isa`]), else
//! plain Rust. `KOKORO_TVM_EXT_NO_BF16=1` hides them, so the fallbacks can be
//! tested on any machine.
//!
//! Measured on the project's Xeon (Emerald Rapids, no AMX exposed), one core:
//! `VDPBF16PS` retires about one per two cycles, so this GEMM peaks at ~85
//! GFLOP/s, while the f32 `gemm` crate reaches ~150: on such CPUs bf16 saves
//! memory, not time (`bench_gemm_bf16`). AMD Zen 4 issues it at the FMA rate:
//! 220-225 GFLOP/s per core against 103-109 for the f32 crate.
//!
//! ```text
//! kokoro_tvm_ext.bf16_native() -> bool: whether the bf16 kernels compute in bf16 here.
//! ```
//!
//! Files: `pack.rs` converts to bf16 and packs the operands, `x86.rs` holds the
//! AVX512-BF16 inner loop and packing, `arm.rs` the BFDOT inner loop, `weights.rs` the weights of the bf16
//! kernels (packed at compile time by `kokoro_tvm_ext.pack_bf16`, read per call,
//! unpacked to f32 where bf16 is not native).
use tvm_ffi::Function;

use crate::gemm::packed::{self, check_operands, disabled_by_env, for_each_block};
use crate::gemm::SharedMut;
use crate::interface;
use crate::job::JobError;

#[cfg(target_arch = "aarch64")]
mod arm;
mod pack;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
mod weights;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use pack::{
    as_u32, pack_a, pack_b, pack_pair, unpack_a_into, unpack_b_into, PackedA, PackedB,
};
pub use pack::{from_bf16, pairs, round_bf16, to_bf16};
pub use weights::{pack_function, packed_shape};
pub(crate) use weights::{packed_weights, with_f32_weights};

pub use packed::{Kind, MR, NR};
/// Pairs of K per cache block: a B micro-panel (`KC * NR * 4` bytes, 32 KiB)
/// stays in L1 while the tile walks down the rows.
const KC: usize = 256;

// ---------------------------------------------------------------------------
// Picking the inner loop.
// ---------------------------------------------------------------------------

pub use packed::Isa;

/// The registered `kokoro_tvm_ext.bf16_native`.
pub fn native_function() -> Function {
    packed::native_function(&interface::BF16_NATIVE, native_bf16)
}

/// Whether `KOKORO_TVM_EXT_NO_BF16` asks to ignore AVX512-BF16 (any value but
/// empty or "0").
pub fn bf16_disabled_by_env() -> bool {
    disabled_by_env("KOKORO_TVM_EXT_NO_BF16")
}

/// Whether this CPU has AVX512-BF16 and the environment does not hide it: the
/// condition for the bf16 kernels to run in bf16 (they fall back to f32
/// otherwise, on weights unpacked by `with_f32_weights`). Read once per process.
pub fn native_bf16() -> bool {
    isa() == Isa::Native
}

/// The inner loop this process uses, detected once.
pub fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| detect(bf16_disabled_by_env()))
}

fn detect(no_bf16: bool) -> Isa {
    Isa::detect(no_bf16, || {
        #[cfg(target_arch = "x86_64")]
        return is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16");
        #[cfg(target_arch = "aarch64")]
        return std::arch::is_aarch64_feature_detected!("bf16");
        #[allow(unreachable_code)]
        false
    })
}

// ---------------------------------------------------------------------------
// The GEMM.
// ---------------------------------------------------------------------------

/// `C = (accumulate ? C : 0) + A × B` with `C` the row-major `a.rows x b.cols`
/// block at `c_offset` of `c` with `ldc` elements per row.
///
/// `parallel` splits the tiles over the rayon pool; callers that already run
/// one job per thread pass `false`.
pub(crate) fn gemm_bf16(
    a: PackedA,
    b: PackedB,
    c: &mut [f32],
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
) -> Result<(), JobError> {
    let shared = SharedMut::new(c);
    // SAFETY: `c` is borrowed mutably for the whole call.
    unsafe { gemm_bf16_shared(a, b, shared, c_offset, ldc, accumulate, parallel, isa()) }
}

/// [`gemm_bf16`] into a [`SharedMut`], with the inner loop given.
///
/// # Safety
/// While this runs, nothing else may read or write the destination block.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_bf16_shared(
    a: PackedA,
    b: PackedB,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    isa: Isa,
) -> Result<(), JobError> {
    let (m, n) = (a.rows, b.cols);
    if a.k != b.k {
        return Err(JobError::new(format!(
            "inner dimensions differ: {} and {}",
            a.k, b.k
        )));
    }
    if !check_operands(&a, &b, &c, c_offset, ldc)? {
        return Ok(());
    }
    let kp = pairs(a.k);
    for_each_block(m.div_ceil(MR), n.div_ceil(NR), parallel, |is, js| {
        for k0 in (0..kp.max(1)).step_by(KC) {
            let kq = KC.min(kp - k0.min(kp));
            let acc = accumulate || k0 > 0;
            for j in js.clone() {
                let cols = NR.min(n - j * NR);
                let bp = &b.data[(j * kp + k0) * NR..][..kq * NR];
                for i in is.clone() {
                    let rows = MR.min(m - i * MR);
                    let ap = &a.data[(i * kp + k0) * MR..][..kq * MR];
                    let row0 = c_offset + i * MR * ldc + j * NR;
                    // The tile's rows, each `cols` long, inside the block checked above.
                    let cp = c.ptr_at(row0);
                    tile(isa, kq, ap, bp, cp, ldc, rows, cols, acc);
                }
            }
        }
        Ok(())
    })
}

/// One `rows x cols` tile (`rows <= MR`, `cols <= NR`) over `kq` pairs.
///
/// # Safety
/// `c` must point at `rows` rows of `cols` writable f32s, `ldc` apart, that no
/// one else touches; `a` and `b` hold `kq` pairs of one panel each.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    isa: Isa,
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    acc: bool,
) {
    debug_assert!(a.len() >= kq * MR && b.len() >= kq * NR && rows <= MR && cols <= NR);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Native => x86::tile_native(kq, a.as_ptr(), b.as_ptr(), c, ldc, rows, cols, acc),
        #[cfg(target_arch = "aarch64")]
        Isa::Native => arm::tile_bfdot(kq, a.as_ptr(), b.as_ptr(), c, ldc, rows, cols, acc),
        _ => tile_portable(kq, a, b, c, ldc, rows, cols, acc),
    }
}

// Inlined into the tile loop: as a separate call it measured ~18% slower
// (bench_gemm_bf16, plain Rust only).
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile_portable(
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    acc: bool,
) {
    let mut t = [[0.0f32; NR]; MR];
    for q in 0..kq {
        // B's pairs as f32s once per pair of K, not once per row of A.
        let bq = &b[q * NR..(q + 1) * NR];
        let be: [f32; NR] = std::array::from_fn(|j| f32::from_bits(bq[j] << 16));
        let bo: [f32; NR] = std::array::from_fn(|j| f32::from_bits(bq[j] & 0xffff_0000));
        for (r, row) in t.iter_mut().enumerate() {
            let p = a[q * MR + r];
            let (ae, ao) = (f32::from_bits(p << 16), f32::from_bits(p & 0xffff_0000));
            for ((v, e), o) in row.iter_mut().zip(&be).zip(&bo) {
                *v += ae * e + ao * o;
            }
        }
    }
    for (r, row) in t.iter().enumerate().take(rows) {
        let dst = std::slice::from_raw_parts_mut(c.add(r * ldc), cols);
        for (d, v) in dst.iter_mut().zip(row) {
            *d = if acc { *d + v } else { *v };
        }
    }
}
