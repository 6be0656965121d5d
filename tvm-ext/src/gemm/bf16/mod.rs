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
//! bf16 (in 8 x 8 quarters), else plain Rust: bf16's rows of the precision
//! table (`precision/table.rs`), picked once per process (see [`isa`]).
//! `KOKORO_TVM_EXT_NO_BF16=1` hides them, so the fallbacks can be tested on
//! any machine.
//!
//! Measured on the project's Xeon (Emerald Rapids, no AMX exposed), one core:
//! `VDPBF16PS` retires about one per two cycles, so this GEMM peaks at ~85
//! GFLOP/s, while the f32 `gemm` crate reaches ~150: on such CPUs bf16 saves
//! memory, not time (`bench_gemm_bf16`). AMD Zen 4 issues it at the FMA rate:
//! 220-225 GFLOP/s per core against 103-109 for the f32 crate.
//!
//! `kokoro_tvm_ext.bf16_native() -> bool` says whether the bf16 kernels compute
//! in bf16 here (the table's answer).
//!
//! Files: `pack.rs` converts to bf16 and packs the operands, `x86.rs` holds the
//! AVX512-BF16 inner loop and packing, `arm.rs` the BFDOT inner loop, `weights.rs` the weights of the bf16
//! kernels (packed at compile time by `kokoro_tvm_ext.pack_bf16`, read per call,
//! unpacked to f32 where bf16 is not native).
use tvm_ffi::TensorView;

#[cfg(any(target_arch = "x86_64", test))]
use crate::gemm::amx;
#[cfg(any(target_arch = "x86_64", test))]
use crate::gemm::int8::Walk;
#[cfg(any(target_arch = "x86_64", test))]
use crate::gemm::packed::check_block;
use crate::gemm::packed::{self, check_operands, conv_inner, for_each_block};
use crate::gemm::{Relayed, SharedMut};
use crate::isa::Isa;
use crate::job::JobError;
use crate::precision::{table, Precision};

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
#[cfg(test)]
pub(crate) use weights::pack_conv1d;
pub(crate) use weights::packed_weights;
pub use weights::{pack_function, packed_shape};

pub use packed::{Kind, MR, NR};
/// Pairs of K per cache block: a B micro-panel (`KC * NR * 4` bytes, 32 KiB)
/// stays in L1 while the tile walks down the rows.
const KC: usize = 256;

// ---------------------------------------------------------------------------
// The precision.
// ---------------------------------------------------------------------------

/// The bf16 precision: weights packed in pairs by [`pack_function`] (A for
/// conv1d, B for the others), inputs rounded per call, the micro-kernel of its
/// row of the precision table.
pub(crate) struct Bf16Gemm;

impl Precision for Bf16Gemm {
    const NAME: &'static str = "bf16";
    const PANEL: usize = NR;
    type Weights<'w> = [u32];

    fn with_call_weights<R>(
        who: &str,
        w: &TensorView,
        kind: Kind,
        groups: usize,
        w_shape: &[usize],
        run: impl FnOnce(&[u32]) -> tvm_ffi::Result<R>,
    ) -> tvm_ffi::Result<R> {
        run(&packed_weights(
            who,
            w,
            &packed_shape(kind, groups, w_shape),
        )?)
    }

    fn weights_fit(w: &[u32], kind: Kind, groups: usize, w_shape: &[usize]) -> bool {
        let (rows, cols, _) = operand(kind, groups, w_shape);
        w.len() == groups * per_group(kind, rows, cols)
    }

    fn unpack_f32(w: &[u32], kind: Kind, groups: usize, w_shape: &[usize], dst: &mut [f32]) {
        let (rows, cols, is_a) = operand(kind, groups, w_shape);
        let packed = w.chunks_exact(per_group(kind, rows, cols).max(1));
        let group_len = w_shape.iter().product::<usize>() / groups.max(1);
        let mut tap_major = vec![0.0f32; if is_a { rows * cols } else { 0 }];
        for (p, f32_w) in packed.zip(dst.chunks_exact_mut(group_len.max(1))) {
            if !is_a {
                unpack_b_into(p, rows, cols, f32_w);
                continue;
            }
            // conv1d's operand is tap-major (`weights.rs`): back to torch's (c, tap).
            unpack_a_into(p, rows, cols, &mut tap_major);
            let (cin_g, taps) = (w_shape[1], w_shape[2]);
            for (o, row) in tap_major.chunks_exact(cols.max(1)).enumerate() {
                for (l, &v) in row.iter().enumerate() {
                    if let Some(i) = conv_inner::<2>(l, cin_g, taps) {
                        f32_w[o * cin_g * taps + i] = v;
                    }
                }
            }
        }
    }
}

/// One group's operand of `kind`'s weights (torch's shape `w_shape`): its rows
/// and columns, and whether it is A (conv1d's, its inner dimension tap-major
/// with each tap's channels padded to pairs) rather than B.
fn operand(kind: Kind, groups: usize, w_shape: &[usize]) -> (usize, usize, bool) {
    match (kind, w_shape) {
        (Kind::Conv1d, &[cout, cin_g, k]) => (cout / groups, 2 * k * pairs(cin_g), true),
        (Kind::Conv1dTranspose, &[cin, cout_g, k]) => (cin / groups, cout_g * k, false),
        (Kind::Matmul, &[k, n]) => (k, n, false),
        _ => (0, 0, false),
    }
}

/// `u32`s of one group's packed operand.
fn per_group(kind: Kind, rows: usize, cols: usize) -> usize {
    if kind == Kind::Conv1d {
        PackedA::len(rows, cols)
    } else {
        PackedB::len(rows, cols)
    }
}

/// The micro-kernel's instruction set in this process: bf16's row of the
/// precision table, chosen once.
pub(crate) fn isa() -> Isa {
    table::selected(Bf16Gemm::NAME).1
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
    unsafe {
        gemm_bf16_shared(
            a,
            b,
            shared,
            c_offset,
            ldc,
            accumulate,
            parallel,
            isa(),
            None,
        )
    }
}

/// [`gemm_bf16`] into a [`SharedMut`], with the inner loop given; the GEMMs
/// of one call that multiply the same A pass the same `tiles`, where AMX keeps
/// it re-laid.
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
    tiles: Option<&Relayed>,
) -> Result<(), JobError> {
    let (m, n) = (a.rows, b.cols);
    if !check_operands(&a, &b, usize::MAX, &c, c_offset, ldc)? {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::AmxBf16 {
        return gemm_tiles::<amx::x86::Hardware>(
            a, b, c, c_offset, ldc, accumulate, parallel, tiles,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = tiles; // only AMX keeps A re-laid
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

/// [`gemm_bf16_shared`] on AMX-style tiles (`T`: the CPU's, or the plain-Rust
/// model in tests).
///
/// # Safety
/// As [`gemm_bf16_shared`], the operands checked; `T` runs on this CPU.
#[cfg(any(target_arch = "x86_64", test))]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_tiles<T: amx::Tiles + Default>(
    a: PackedA,
    b: PackedB,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    tiles: Option<&Relayed>,
) -> Result<(), JobError> {
    let walk = Walk::panels(pairs(a.k));
    gemm_walk_tiles::<T>(
        a, b.data, b.cols, walk, c, c_offset, ldc, accumulate, parallel, tiles,
    )
}

/// `C = (accumulate ? C : 0) + A × B` on AMX-style tiles (`gemm/amx/`), B's
/// `n` columns read through `walk` from `b`: [`PackedB`] panels, or a stride-1
/// convolution's input window packed once per tile (one row of pairs of
/// channels, its taps offsets along the row; A's pairs tap-major, as conv1d's
/// weights are). The other bf16 loops read panels only.
///
/// # Safety
/// As [`gemm_bf16_shared`]; `T` runs on this CPU.
#[cfg(any(target_arch = "x86_64", test))]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_walk_tiles<T: amx::Tiles + Default>(
    a: PackedA,
    b: &[u32],
    n: usize,
    walk: Walk,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    parallel: bool,
    tiles: Option<&Relayed>,
) -> Result<(), JobError> {
    walk.check_window(&a, b.len(), n)?;
    if !check_block(a.rows, n, &c, c_offset, ldc)? {
        return Ok(());
    }
    let m = a.rows;
    amx::gemm::<T>(
        a.data,
        m,
        b,
        n,
        walk,
        amx::Dot::Bf16,
        parallel,
        tiles,
        |sums, i, j| {
            let (rows, cols) = (MR.min(m - i * MR), NR.min(n - j * NR));
            for (r, row) in sums.iter().enumerate().take(rows) {
                // Row r of the tile, inside the block checked by the caller.
                let dst = std::slice::from_raw_parts_mut(
                    c.ptr_at(c_offset + (i * MR + r) * ldc + j * NR),
                    cols,
                );
                for (d, &v) in dst.iter_mut().zip(row) {
                    let v = f32::from_bits(v);
                    *d = if accumulate { *d + v } else { v };
                }
            }
        },
    )
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
        Isa::Avx512Bf16 => x86::tile_native(kq, a.as_ptr(), b.as_ptr(), c, ldc, rows, cols, acc),
        #[cfg(target_arch = "aarch64")]
        Isa::NeonBf16 => arm::tile_bfdot(kq, a.as_ptr(), b.as_ptr(), c, ldc, rows, cols, acc),
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
