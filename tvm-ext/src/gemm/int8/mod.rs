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
use rayon::prelude::*;
use tvm_ffi::{Any, AnyView, Function};

use crate::args::Cursor;
use crate::gemm::{threads, SharedMut};
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

pub(crate) use pack::{as_i32, min_max, pack_quad, quads, Affine};
pub(crate) use weights::{fill_affine, packed_weights, with_f32_weights, Weights};
pub use weights::{pack_function, packed_len, Kind};

/// Rows of a [`PackedA`] panel: the register tile's height.
pub const MR: usize = 8;
/// Columns of a [`PackedB`] panel: the register tile's width, two zmm vectors.
pub const NR: usize = 32;
/// The longest inner dimension: `255 * 128 * MAX_K` stays below `2^31`.
pub const MAX_K: usize = 65_536;

/// The inner loop of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// `VPDPBUSD` (AVX512-VNNI).
    Vnni,
    /// Plain Rust: exact, but slow; the int8 kernels use the f32 path instead
    /// when [`native_int8`] is false.
    Portable,
}

/// The registered `kokoro_tvm_ext.int8_native`.
pub fn native_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> tvm_ffi::Result<Any> {
        Cursor::new(&interface::INT8_NATIVE, args)?.finish()?;
        Ok(Any::from(native_int8()))
    })
}

/// Whether `KOKORO_TVM_EXT_NO_VNNI` asks to ignore AVX512-VNNI (any value but
/// empty or "0").
pub fn vnni_disabled_by_env() -> bool {
    std::env::var("KOKORO_TVM_EXT_NO_VNNI").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether this CPU has AVX512-VNNI and the environment does not hide it: the
/// condition for the int8 kernels to run in int8. Read once per process.
pub fn native_int8() -> bool {
    isa() == Isa::Vnni
}

/// The inner loop this process uses, detected once.
pub fn isa() -> Isa {
    static ISA: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| detect(vnni_disabled_by_env()))
}

fn detect(no_vnni: bool) -> Isa {
    #[cfg(target_arch = "x86_64")]
    if !no_vnni
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
    {
        return Isa::Vnni;
    }
    let _ = no_vnni;
    Isa::Portable
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

/// The broadcast operand, `rows x k`, in panels of [`MR`] rows (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedA<'a> {
    pub data: &'a [u32],
    pub rows: usize,
    pub k: usize,
}

/// The vector operand, `k x cols`, in panels of [`NR`] columns (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedB<'a> {
    pub data: &'a [u32],
    pub cols: usize,
    pub k: usize,
}

impl PackedA<'_> {
    /// `u32`s of a packed `rows x k` operand.
    pub const fn len(rows: usize, k: usize) -> usize {
        rows.div_ceil(MR) * quads(k) * MR
    }
}

impl<'a> PackedB<'a> {
    /// `u32`s of a packed `k x cols` operand.
    pub const fn len(k: usize, cols: usize) -> usize {
        cols.div_ceil(NR) * quads(k) * NR
    }

    /// The panels `p0..p1` as an operand of their own (the last one may be partial).
    pub fn panels(&self, p0: usize, p1: usize) -> Result<PackedB<'a>, JobError> {
        let n = quads(self.k) * NR;
        let total = self.cols.div_ceil(NR);
        if p0 > p1 || p1 > total || self.data.len() < total * n {
            return Err(JobError::new(format!(
                "panels {p0}..{p1} of a packed operand with {total} panels"
            )));
        }
        Ok(PackedB {
            data: &self.data[p0 * n..p1 * n],
            cols: self.cols.min(p1 * NR).saturating_sub(p0 * NR),
            k: self.k,
        })
    }
}

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
    if a.data.len() != PackedA::len(m, k) || b.data.len() != PackedB::len(k, n) {
        return Err(JobError::new(format!(
            "packed operands of {} and {} elements do not hold {m}x{k} and {k}x{n}",
            a.data.len(),
            b.data.len(),
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
    if m == 0 || n == 0 {
        return Ok(());
    }
    if m > 1 && ldc < n {
        return Err(JobError::new(format!(
            "ldc {ldc} < {n} columns: rows would alias"
        )));
    }
    c.check(c_offset, n)?;
    c.check(c_offset + (m - 1) * ldc, n)?;
    let kq = quads(k);
    let (mp, np) = (m.div_ceil(MR), n.div_ceil(NR));
    let want = if parallel { 2 * threads() } else { 1 };
    let nj = np.min(want);
    let ni = mp.min(want.div_ceil(nj));
    let job = |jid: usize| -> Result<(), JobError> {
        let (bi, bj) = (jid / nj, jid % nj);
        let (i0, i1) = (bi * mp / ni, (bi + 1) * mp / ni);
        let (j0, j1) = (bj * np / nj, (bj + 1) * np / nj);
        for j in j0..j1 {
            let cols = NR.min(n - j * NR);
            let bp = &b.data[j * kq * NR..][..kq * NR];
            for i in i0..i1 {
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
    };
    if ni * nj > 1 {
        (0..ni * nj)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(job)
    } else {
        job(0)
    }
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
        (Isa::Vnni, Signs::WeightsA) => {
            x86::tile_vnni::<false>(kq, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "x86_64")]
        (Isa::Vnni, Signs::WeightsB) => {
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

#[allow(clippy::too_many_arguments)]
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
