//! The int8 GEMM behind the `precision="int8"` kernels (`conv/int8/`,
//! `matmul/int8/`): `C (f32) (+)= dequantize(A × B)` with one operand int8
//! weights (symmetric, a scale per output channel, quantized at compile time by
//! `kokoro_tvm_ext.pack_int8`) and the other u8 activations (affine, a scale
//! and zero point per row or per tile, quantized per call), int32 accumulation.
//!
//! Both operands are packed in quads along the inner dimension K, the layout
//! `VPDPBUSD` reads: one `u32` holds the four bytes `v[4q..4q + 4]`, the first
//! in its low byte. With `kq = ceil(k / 4)` and zeros past every edge:
//!
//! - [`PackedA`], the broadcast operand (`rows x k`), in panels of [`MR`] rows:
//!   `data[(panel * kq + q) * MR + r]` holds `A[panel*MR + r, 4q..4q+4]`.
//! - [`PackedB`], the vector operand (`k x cols`), in panels of [`NR`] columns:
//!   `data[(panel * kq + q) * NR + c]` holds `B[4q..4q+4, panel*NR + c]`.
//!
//! Which operand is the unsigned one is the caller's choice ([`Signs`]):
//! conv1d multiplies its int8 weights (A) by its u8 im2col tile (B); matmul and
//! the transposed convolution their u8 input (A) by int8 weights (B).
//!
//! Dequantizing: with `a ≈ sa * (qa - za)` per row and `b ≈ sb * (qb - zb)`
//! per column (one of `za`, `zb` is zero: the weights are symmetric), and the
//! weights' sums over K precomputed, `sum_l a b = sa sb (Σ qa qb - za Σ qb - zb
//! Σ qa)`: the epilogue subtracts `row_off[r] * col_off[c]` (the zero point
//! times the weights' sums) from the int32 sum and scales it by
//! `row_scale[r] * col_scale[c]` ([`Scales`]). The integer part is exact: no
//! product saturates (`VPDPBUSD` adds its four u8 x s8 products in 32 bits),
//! and K is at most [`MAX_K`], so no sum overflows.
//!
//! The inner loop, an `MR x NR` tile of 16 zmm accumulators, uses `VPDPBUSD`
//! where the CPU has AVX512-VNNI (checked once per process, see [`isa`]), else
//! plain Rust. `KOKORO_TVM_EXT_NO_VNNI=1` hides AVX512-VNNI: the int8 kernels
//! then run the f32 kernels on the dequantized weights (as on CPUs without it).
//!
//! ```text
//! kokoro_tvm_ext.int8_native() -> bool: whether the int8 kernels compute in int8 here.
//! ```
//!
//! Files: `pack.rs` quantizes and packs the activations, `x86.rs` holds the
//! AVX-512 inner loop and packing, `weights.rs` the weights (packed at compile
//! time, read per call, dequantized to f32 where VNNI is missing).
use tvm_ffi::Function;

use crate::gemm::packed::{self, check_operands, disabled_by_env, for_each_block};
use crate::gemm::SharedMut;
use crate::interface;
use crate::job::JobError;

mod pack;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
mod weights;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use pack::{
    as_i32, as_u8, min_max, pack_quad, pack_quad_u8, quads, quantize_row, Affine,
};
pub(crate) use weights::{fill_affine, packed_weights, with_f32_weights, Weights};
pub use weights::{pack_function, packed_len};

pub use packed::{Kind, MR, NR};
/// The longest inner dimension: `255 * 128 * MAX_K` stays below `2^31`.
pub const MAX_K: usize = 65_536;

pub use packed::Isa;

/// The registered `kokoro_tvm_ext.int8_native`.
pub fn native_function() -> Function {
    packed::native_function(&interface::INT8_NATIVE, native_int8)
}

/// Whether `KOKORO_TVM_EXT_NO_VNNI` asks to ignore AVX512-VNNI (any value but
/// empty or "0").
pub fn vnni_disabled_by_env() -> bool {
    disabled_by_env("KOKORO_TVM_EXT_NO_VNNI")
}

/// Whether this CPU has AVX512-VNNI and the environment does not hide it: the
/// condition for the int8 kernels to run in int8. Read once per process.
pub fn native_int8() -> bool {
    isa() == Isa::Native
}

/// The inner loop this process uses, detected once.
pub fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| detect(vnni_disabled_by_env()))
}

fn detect(no_vnni: bool) -> Isa {
    Isa::detect(no_vnni, || {
        #[cfg(target_arch = "x86_64")]
        return is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni");
        #[allow(unreachable_code)]
        false
    })
}

// ---------------------------------------------------------------------------
// The GEMM.
// ---------------------------------------------------------------------------

/// Which packed operand holds the unsigned bytes (the activations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signs {
    /// A is int8 (weights), B u8 (activations): conv1d.
    WeightsA,
    /// A is u8 (activations), B int8 (weights): matmul, conv1d_transpose.
    WeightsB,
}

/// The broadcast operand, `rows x k`, in panels of [`MR`] rows of quads (module docs).
pub(crate) type PackedA<'a> = packed::PackedA<'a, 4>;
/// The vector operand, `k x cols`, in panels of [`NR`] columns of quads (module docs).
pub(crate) type PackedB<'a> = packed::PackedB<'a, 4>;

/// The dequantization of a product: element `(r, c)` is
/// `(sum - row_off[r] * col_off[c]) * row_scale[r] * col_scale[c]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scales<'a> {
    pub row_scale: &'a [f32],
    pub row_off: &'a [i32],
    pub col_scale: &'a [f32],
    pub col_off: &'a [i32],
}

/// `C = (accumulate ? C : 0) + dequantize(A × B)` with `C` the row-major
/// `a.rows x b.cols` block at `c_offset` of `c` with `ldc` elements per row.
///
/// `parallel` splits the tiles over the rayon pool; callers that already run
/// one job per thread pass `false`.
///
/// # Safety
/// While this runs, nothing else may read or write the destination block.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_int8(
    a: PackedA,
    b: PackedB,
    signs: Signs,
    s: Scales,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    isa: Isa,
) -> Result<(), JobError> {
    let (m, n, k) = (a.rows, b.cols, a.k);
    if a.k != b.k || k > MAX_K {
        return Err(JobError::new(format!(
            "inner dimensions {} and {} (at most {MAX_K})",
            a.k, b.k
        )));
    }
    if s.row_scale.len() < m || s.row_off.len() < m || s.col_scale.len() < n || s.col_off.len() < n
    {
        return Err(JobError::new(format!(
            "scales for {} / {} rows and {} / {} columns, need {m} and {n}",
            s.row_scale.len(),
            s.row_off.len(),
            s.col_scale.len(),
            s.col_off.len()
        )));
    }
    if !check_operands(&a, &b, &c, c_offset, ldc)? {
        return Ok(());
    }
    let kq = quads(k);
    for_each_block(m.div_ceil(MR), n.div_ceil(NR), parallel, |is, js| {
        for j in js {
            let cols = NR.min(n - j * NR);
            let bp = &b.data[j * kq * NR..][..kq * NR];
            for i in is.clone() {
                let rows = MR.min(m - i * MR);
                let ap = &a.data[i * kq * MR..][..kq * MR];
                let t = Tile {
                    rows,
                    cols,
                    row_scale: &s.row_scale[i * MR..][..rows],
                    row_off: &s.row_off[i * MR..][..rows],
                    col_scale: &s.col_scale[j * NR..][..cols],
                    col_off: &s.col_off[j * NR..][..cols],
                };
                // The tile's rows, each `cols` long, inside the block checked above.
                let cp = c.ptr_at(c_offset + i * MR * ldc + j * NR);
                tile(isa, signs, kq, ap, bp, cp, ldc, &t, accumulate);
            }
        }
        Ok(())
    })
}

/// One tile's extent and dequantization (slices of [`Scales`] from its corner).
pub(crate) struct Tile<'a> {
    pub rows: usize,
    pub cols: usize,
    pub row_scale: &'a [f32],
    pub row_off: &'a [i32],
    pub col_scale: &'a [f32],
    pub col_off: &'a [i32],
}

/// One `rows x cols` tile (`rows <= MR`, `cols <= NR`) over `kq` quads.
///
/// # Safety
/// `c` must point at `t.rows` rows of `t.cols` writable f32s, `ldc` apart, that
/// no one else touches; `a` and `b` hold `kq` quads of one panel each.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    isa: Isa,
    signs: Signs,
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    acc: bool,
) {
    debug_assert!(a.len() >= kq * MR && b.len() >= kq * NR && t.rows <= MR && t.cols <= NR);
    match (isa, signs) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Native, Signs::WeightsA) => {
            x86::tile_vnni::<false>(kq, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "x86_64")]
        (Isa::Native, Signs::WeightsB) => {
            x86::tile_vnni::<true>(kq, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        _ => tile_portable(signs, kq, a, b, c, ldc, t, acc),
    }
}

/// The four bytes of a quad as signed or unsigned values.
#[inline]
fn bytes(v: u32, unsigned: bool) -> [i32; 4] {
    let b = v.to_le_bytes();
    if unsigned {
        b.map(|x| x as i32)
    } else {
        b.map(|x| x as i8 as i32)
    }
}

// Inlined into the tile loop, as the bf16 one (which measured ~18% slower
// as a separate call).
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile_portable(
    signs: Signs,
    kq: usize,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    acc: bool,
) {
    let a_unsigned = signs == Signs::WeightsB;
    let mut sum = [[0i32; NR]; MR];
    for q in 0..kq {
        let bq: [[i32; 4]; NR] = std::array::from_fn(|j| bytes(b[q * NR + j], !a_unsigned));
        for (r, row) in sum.iter_mut().enumerate() {
            let ar = bytes(a[q * MR + r], a_unsigned);
            for (v, bv) in row.iter_mut().zip(&bq) {
                *v = v.wrapping_add(ar[0] * bv[0] + ar[1] * bv[1] + ar[2] * bv[2] + ar[3] * bv[3]);
            }
        }
    }
    for (r, row) in sum.iter().enumerate().take(t.rows) {
        let dst = std::slice::from_raw_parts_mut(c.add(r * ldc), t.cols);
        for (j, (d, &v)) in dst.iter_mut().zip(row).enumerate() {
            let x = (v - t.row_off[r] * t.col_off[j]) as f32 * (t.row_scale[r] * t.col_scale[j]);
            *d = if acc { *d + x } else { x };
        }
    }
}
