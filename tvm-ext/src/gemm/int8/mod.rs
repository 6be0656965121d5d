//! The int8 GEMM behind the `precision="int8"` kernels (`conv/int8/`,
//! `matmul/int8/`): `C (f32) (+)= dequantize(A × B)` with one operand int8
//! weights (symmetric, a scale per output channel, quantized at compile time by
//! `kokoro_tvm_ext.pack_int8`) and the other u8 activations (affine, a scale
//! and zero point per row or per tile, quantized per call), int32 accumulation.
//!
//! Both operands are packed in quads along the inner dimension K, the layout
//! `VPDPBUSD` and `SDOT` read: one `u32` holds the four bytes `v[4q..4q + 4]`, the first
//! in its low byte. With `kq = ceil(k / 4)` and zeros past every edge:
//!
//! - [`PackedA`], the broadcast operand (`rows x k`), in panels of [`MR`] rows:
//!   `data[(panel * kq + q) * MR + r]` holds `A[panel*MR + r, 4q..4q+4]`.
//! - [`PackedB`], the vector operand (`k x cols`), in panels of [`NR`] columns:
//!   `data[(panel * kq + q) * NR + c]` holds `B[4q..4q+4, panel*NR + c]`.
//!
//! Which operand is the unsigned one is the caller's choice ([`Signs`]):
//! conv1d multiplies its int8 weights (A) by its u8 input window (B, read
//! through a [`Walk`] rather than as a [`PackedB`]); matmul and the transposed
//! convolution their u8 input (A) by int8 weights (B).
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
//! The inner loop, an `MR x NR` tile, uses the CPU's int8 dot products
//! (int8's rows of the precision table, `precision/table.rs`, picked once per
//! process, see [`isa`]): `VPDPBUSD` where an x86 CPU has
//! AVX512-VNNI (16 zmm accumulators); on aarch64 `USMMLA` where the CPU has
//! i8mm, else `SDOT` where it has dotprod (in 8 x 8 quarters); else plain
//! Rust. `KOKORO_TVM_EXT_NO_VNNI=1` hides these instructions on either
//! architecture (one switch per precision, as `KOKORO_TVM_EXT_NO_BF16`): the
//! int8 kernels then run the f32 kernels on the dequantized weights (as on CPUs
//! without them).
//!
//! `kokoro_tvm_ext.int8_native() -> bool` says whether the int8 kernels compute
//! in int8 here (the table's answer).
//!
//! Files: `pack.rs` quantizes and packs the activations, `x86.rs` holds the
//! AVX-512 inner loop and packing, `arm.rs` the SDOT and USMMLA inner loops,
//! `weights.rs` the weights (packed at compile time, read per call, dequantized
//! to f32 where the int8 instructions are missing).
use tvm_ffi::TensorView;

#[cfg(any(target_arch = "x86_64", test))]
use crate::gemm::amx;
use crate::gemm::packed::{self, check_block, check_operands, for_each_block};
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
    as_i32, as_u8, interleave_quad, min_max, pack_quad, quads, quantize_row, Affine,
};
pub(crate) use weights::{dequantize_into, fill_affine, packed_weights, Weights};
pub use weights::{pack_function, packed_len};

pub use packed::{Kind, MR, NR};
/// The longest inner dimension: `255 * 128 * MAX_K` stays below `2^31`.
pub const MAX_K: usize = 65_536;

/// The int8 precision: weights quantized and packed in quads by
/// [`pack_function`] (A for conv1d, B for the others), activations quantized
/// per call, the micro-kernel of its row of the precision table.
pub(crate) struct Int8Gemm;

impl Precision for Int8Gemm {
    const NAME: &'static str = "int8";
    const PANEL: usize = NR;
    type Weights<'w> = Weights<'w>;

    fn with_call_weights<R>(
        who: &str,
        w: &TensorView,
        kind: Kind,
        groups: usize,
        w_shape: &[usize],
        run: impl FnOnce(&Weights) -> tvm_ffi::Result<R>,
    ) -> tvm_ffi::Result<R> {
        run(&packed_weights(who, w, kind, groups, w_shape)?)
    }

    /// [`packed_weights`] checked them against the call already.
    fn weights_fit(_w: &Weights, _kind: Kind, _groups: usize, _w_shape: &[usize]) -> bool {
        true
    }

    fn unpack_f32(w: &Weights, kind: Kind, groups: usize, w_shape: &[usize], dst: &mut [f32]) {
        dequantize_into(w, kind, groups, w_shape, dst)
    }
}

/// The micro-kernel's instruction set in this process: int8's row of the
/// precision table, chosen once.
pub(crate) fn isa() -> Isa {
    table::selected(Int8Gemm::NAME).1
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
///
/// The offsets on the weights' side (rows of A for [`Signs::WeightsA`], else
/// columns of B) must be the sums of the weights over K, those on the
/// activations' side their zero points: the SDOT loop (`arm.rs`) reads the
/// activations as `u - 128` and relies on the sums to add the 128 back.
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
    check_scales(&s, m, n)?;
    if !check_operands(&a, &b, MAX_K, &c, c_offset, ldc)? {
        return Ok(());
    }
    let walk = Walk::panels(quads(k));
    gemm_walk(
        a, b.data, n, walk, signs, s, c, c_offset, ldc, accumulate, None, parallel, isa, None,
    )
}

/// How the tile loop finds B's quads: panel `j` starts at `j * panel_step`;
/// quad `t * per_tap + cq` of a panel (A's quad of the same index) at
/// `t * tap_step + cq * quad_step` from there, its [`NR`] words contiguous.
///
/// [`PackedB`] is one tap of `kq` quads, [`NR`] apart. A stride-1 convolution
/// packs its input window once instead ([`gemm_int8_windowed`]): one row of
/// words per quad of channels, and its taps are offsets along the row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    pub panel_step: usize,
    pub taps: usize,
    pub per_tap: usize,
    pub tap_step: usize,
    pub quad_step: usize,
}

impl Walk {
    /// [`PackedB`]'s layout, `kq` quads.
    pub const fn panels(kq: usize) -> Self {
        Walk {
            panel_step: kq * NR,
            taps: 1,
            per_tap: kq,
            tap_step: 0,
            quad_step: NR,
        }
    }

    /// That `a` is whole and its words of K are this walk's, and that a window
    /// of `len` words holds `cols` columns read through it (the last panel
    /// reads [`NR`] columns, the ones past `cols` are not stored).
    pub(crate) fn check_window<const G: usize>(
        &self,
        a: &packed::PackedA<G>,
        len: usize,
        cols: usize,
    ) -> Result<(), JobError> {
        let (words, kw) = (a.k.div_ceil(G), self.taps * self.per_tap);
        if words != kw {
            return Err(JobError::new(format!(
                "{words} words of A against {kw} of B"
            )));
        }
        if a.data.len() != packed::PackedA::<G>::len(a.rows, a.k) {
            return Err(JobError::new(format!(
                "a packed operand of {} elements does not hold {}x{}",
                a.data.len(),
                a.rows,
                a.k
            )));
        }
        let panels = cols.div_ceil(NR);
        if panels > 0 && (panels - 1) * self.panel_step + self.reach() > len {
            return Err(JobError::new(format!(
                "a window of {len} words holds no {cols} columns read as {self:?}"
            )));
        }
        Ok(())
    }

    /// Words from a panel's start to one past its last quad's last word
    /// (none without quads: an empty inner dimension reads nothing).
    pub(crate) fn reach(&self) -> usize {
        if self.taps == 0 || self.per_tap == 0 {
            return 0;
        }
        (self.taps - 1) * self.tap_step + (self.per_tap - 1) * self.quad_step + NR
    }
}

/// [`gemm_int8`] with B read through `walk` from `b` (`cols` columns, the
/// inner dimension `4 * walk.taps * walk.per_tap`, A's quads in the same order):
/// a stride-1 convolution's input window, packed once per tile ([`Walk`]);
/// `C = dequantize(A × B) + row_bias[r]` (without a bias, the product alone).
/// The tiles of one call pass the same `shared`, where AMX keeps A re-laid.
///
/// # Safety
/// As [`gemm_int8`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_int8_windowed(
    a: PackedA,
    b: &[u32],
    cols: usize,
    walk: Walk,
    s: Scales,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    row_bias: Option<&[f32]>,
    parallel: bool,
    isa: Isa,
    shared: Option<&Relayed>,
) -> Result<(), JobError> {
    let m = a.rows;
    walk.check_window(&a, b.len(), cols)?;
    check_scales(&s, m, cols)?;
    if row_bias.is_some_and(|b| b.len() < m) {
        return Err(JobError::new(format!("a bias for fewer than {m} rows")));
    }
    if !check_block(m, cols, &c, c_offset, ldc)? {
        return Ok(());
    }
    gemm_walk(
        a,
        b,
        cols,
        walk,
        Signs::WeightsA,
        s,
        c,
        c_offset,
        ldc,
        false,
        row_bias,
        parallel,
        isa,
        shared,
    )
}

/// The tile loop of both: `C = (accumulate ? C : row_bias or 0) + dequantize(A × B)`,
/// B read through `walk`.
///
/// # Safety
/// As [`gemm_int8`]; the operands and scales checked by the callers.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_walk(
    a: PackedA,
    b: &[u32],
    n: usize,
    walk: Walk,
    signs: Signs,
    s: Scales,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    row_bias: Option<&[f32]>,
    parallel: bool,
    isa: Isa,
    shared: Option<&Relayed>,
) -> Result<(), JobError> {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::AmxInt8 {
        return gemm_walk_tiles::<amx::x86::Hardware>(
            a, b, n, walk, signs, s, c, c_offset, ldc, accumulate, row_bias, parallel, isa, shared,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = shared; // only AMX keeps A re-laid
    let (m, kq) = (a.rows, a.k.div_ceil(4));
    for_each_block(m.div_ceil(MR), n.div_ceil(NR), parallel, |is, js| {
        for j in js {
            let bp = &b[j * walk.panel_step..][..walk.reach()];
            for i in is.clone() {
                let ap = &a.data[i * kq * MR..][..kq * MR];
                let t = Tile::at(&s, row_bias, m, n, i, j);
                // The tile's rows, each `cols` long, inside the block checked above.
                let cp = c.ptr_at(c_offset + i * MR * ldc + j * NR);
                tile(isa, signs, &walk, ap, bp, cp, ldc, &t, accumulate);
            }
        }
        Ok(())
    })
}

/// [`gemm_walk`] on AMX-style tiles (`T`: the CPU's, or the plain-Rust model
/// in tests): the shared tile loop (`gemm/amx/`), this GEMM's epilogue.
///
/// # Safety
/// As [`gemm_walk`]; `T` runs on this CPU, `isa` picks the epilogue.
#[cfg(any(target_arch = "x86_64", test))]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_walk_tiles<T: amx::Tiles + Default>(
    a: PackedA,
    b: &[u32],
    n: usize,
    walk: Walk,
    signs: Signs,
    s: Scales,
    c: SharedMut,
    c_offset: usize,
    ldc: usize,
    accumulate: bool,
    row_bias: Option<&[f32]>,
    parallel: bool,
    isa: Isa,
    shared: Option<&Relayed>,
) -> Result<(), JobError> {
    let dot = match signs {
        Signs::WeightsA => amx::Dot::SignedUnsigned,
        Signs::WeightsB => amx::Dot::UnsignedSigned,
    };
    let m = a.rows;
    amx::gemm::<T>(
        a.data,
        m,
        b,
        n,
        walk,
        dot,
        parallel,
        shared,
        |sums, i, j| {
            // The int32 sums, as the bits the tiles stored.
            let sums = std::slice::from_raw_parts(sums.as_ptr() as *const [i32; NR], sums.len());
            let t = Tile::at(&s, row_bias, m, n, i, j);
            // Panel i's rows of block j, inside the block the callers checked.
            store_sums(
                isa,
                sums,
                c.ptr_at(c_offset + i * MR * ldc + j * NR),
                ldc,
                &t,
                accumulate,
            );
        },
    )
}

/// Scales for at least `m` rows and `n` columns.
fn check_scales(s: &Scales, m: usize, n: usize) -> Result<(), JobError> {
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
    Ok(())
}

/// One tile's extent and dequantization (slices of [`Scales`] from its corner).
pub(crate) struct Tile<'a> {
    pub rows: usize,
    pub cols: usize,
    pub row_scale: &'a [f32],
    pub row_off: &'a [i32],
    pub col_scale: &'a [f32],
    pub col_off: &'a [i32],
    /// Added to each row's dequantized sums where the tile does not accumulate.
    pub row_bias: Option<&'a [f32]>,
}

impl<'a> Tile<'a> {
    /// The tile of row panel `i` and column panel `j` of an `m x n` product.
    fn at(
        s: &Scales<'a>,
        row_bias: Option<&'a [f32]>,
        m: usize,
        n: usize,
        i: usize,
        j: usize,
    ) -> Self {
        let (rows, cols) = (MR.min(m - i * MR), NR.min(n - j * NR));
        Tile {
            rows,
            cols,
            row_scale: &s.row_scale[i * MR..][..rows],
            row_off: &s.row_off[i * MR..][..rows],
            col_scale: &s.col_scale[j * NR..][..cols],
            col_off: &s.col_off[j * NR..][..cols],
            row_bias: row_bias.map(|b| &b[i * MR..][..rows]),
        }
    }
}

/// One `rows x cols` tile (`rows <= MR`, `cols <= NR`) over the quads of `walk`.
///
/// # Safety
/// `c` must point at `t.rows` rows of `t.cols` writable f32s, `ldc` apart, that
/// no one else touches; `a` holds the panel's quads, `b` the panel's `walk.reach()` words.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn tile(
    isa: Isa,
    signs: Signs,
    walk: &Walk,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    acc: bool,
) {
    debug_assert!(
        a.len() >= walk.taps * walk.per_tap * MR
            && b.len() >= walk.reach()
            && t.rows <= MR
            && t.cols <= NR
    );
    match (isa, signs) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512Vnni, Signs::WeightsA) => {
            x86::tile_vnni::<false>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512Vnni, Signs::WeightsB) => {
            x86::tile_vnni::<true>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "aarch64")]
        (Isa::Dotprod, Signs::WeightsA) => {
            arm::tile_sdot::<false>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "aarch64")]
        (Isa::Dotprod, Signs::WeightsB) => {
            arm::tile_sdot::<true>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "aarch64")]
        (Isa::I8mm, Signs::WeightsA) => {
            arm::tile_usmmla::<false>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        #[cfg(target_arch = "aarch64")]
        (Isa::I8mm, Signs::WeightsB) => {
            arm::tile_usmmla::<true>(walk, a.as_ptr(), b.as_ptr(), c, ldc, t, acc)
        }
        _ => tile_portable(signs, walk, a, b, c, ldc, t, acc),
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
    walk: &Walk,
    a: &[u32],
    b: &[u32],
    c: *mut f32,
    ldc: usize,
    t: &Tile,
    acc: bool,
) {
    let a_unsigned = signs == Signs::WeightsB;
    let mut sum = [[0i32; NR]; MR];
    for q in 0..walk.taps * walk.per_tap {
        let at = (q / walk.per_tap) * walk.tap_step + (q % walk.per_tap) * walk.quad_step;
        let bq: [[i32; 4]; NR] = std::array::from_fn(|j| bytes(b[at + j], !a_unsigned));
        for (r, row) in sum.iter_mut().enumerate() {
            let ar = bytes(a[q * MR + r], a_unsigned);
            for (v, bv) in row.iter_mut().zip(&bq) {
                *v = v.wrapping_add(ar[0] * bv[0] + ar[1] * bv[1] + ar[2] * bv[2] + ar[3] * bv[3]);
            }
        }
    }
    store_sums_portable(&sum, c, ldc, t, acc);
}

/// A tile's int32 sums (`sum[r]`: row `r`, its first `t.cols` columns)
/// dequantized into C, in AVX-512 where `isa` has it (the same bits).
///
/// # Safety
/// As [`tile`]'s `c`; `isa` runs here.
#[cfg(any(target_arch = "x86_64", test))]
unsafe fn store_sums(isa: Isa, sum: &[[i32; NR]], c: *mut f32, ldc: usize, t: &Tile, acc: bool) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni | Isa::AmxInt8 => x86::store_sums_from(sum, c, ldc, t, acc),
        _ => store_sums_portable(sum, c, ldc, t, acc),
    }
}

/// The plain-Rust epilogue: a tile's int32 sums (row `r` of `sum`, its first
/// `t.cols` columns) dequantized into C, as [`Tile`] says.
unsafe fn store_sums_portable(sum: &[[i32; NR]], c: *mut f32, ldc: usize, t: &Tile, acc: bool) {
    for (r, row) in sum.iter().enumerate().take(t.rows) {
        let dst = std::slice::from_raw_parts_mut(c.add(r * ldc), t.cols);
        for (j, (d, &v)) in dst.iter_mut().zip(row).enumerate() {
            let x = (v - t.row_off[r] * t.col_off[j]) as f32 * (t.row_scale[r] * t.col_scale[j]);
            *d = match (acc, t.row_bias) {
                (true, _) => *d + x,
                (false, Some(b)) => b[r] + x,
                (false, None) => x,
            };
        }
    }
}
