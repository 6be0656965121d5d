//! The GEMMs every convolution and matmul runs on, kept together: this float32
//! one, the bf16 one of the `precision="bf16"` kernels ([`bf16`]) and the int8
//! one of the `precision="int8"` kernels ([`int8`]); what the last two share
//! (packed panels, the tile loop's blocks, the packers' arguments) is in `packed.rs`.
//!
//! The float32 GEMM is a bounds-checked wrapper of the `gemm-f32` crate (AVX-512
//! / AVX2 kernels picked at run time, rayon parallelism on the current pool).
//!
//! Matrices are described by a [`Layout`] into a slice: element `(i, j)` lives at
//! `offset + i * rs + j * cs`. Every call checks that the last element of each
//! matrix is inside its slice, so a planning mistake becomes an error, never an
//! out-of-bounds access.
use tvm_ffi::{Result, TensorView};

use crate::job::JobError;
use crate::precision::Precision;
use crate::tensor::{expect_shape, input};
use packed::Kind;

#[cfg(any(target_arch = "x86_64", test))]
pub(crate) mod amx;
pub mod bf16;
pub mod int8;
pub(crate) mod packed;
pub mod panels;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

// ---------------------------------------------------------------------------
// GEMM.
// ---------------------------------------------------------------------------

/// Where a matrix lives inside its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub offset: usize,
    /// Elements between rows.
    pub rs: usize,
    /// Elements between columns.
    pub cs: usize,
}

impl Layout {
    /// A row-major matrix with `ld` elements per row, starting at `offset`.
    pub const fn row_major(offset: usize, ld: usize) -> Self {
        Self {
            offset,
            rs: ld,
            cs: 1,
        }
    }

    /// One past the last element of a `rows x cols` matrix, `None` on overflow.
    fn end(&self, rows: usize, cols: usize) -> Option<usize> {
        if rows == 0 || cols == 0 {
            return Some(self.offset);
        }
        let last = (rows - 1)
            .checked_mul(self.rs)?
            .checked_add((cols - 1).checked_mul(self.cs)?)?
            .checked_add(self.offset)?;
        last.checked_add(1)
    }
}

fn check_fits(
    len: usize,
    l: Layout,
    rows: usize,
    cols: usize,
    what: &str,
) -> std::result::Result<(), JobError> {
    match l.end(rows, cols) {
        Some(end) if end <= len => Ok(()),
        _ => Err(JobError::new(format!(
            "{what} matrix {rows}x{cols} at {l:?} does not fit a buffer of {len} elements"
        ))),
    }
}

/// The f32 precision: torch's weights as they are, the `gemm-f32` crate's
/// micro-kernels (its row of `precision/table.rs`).
pub(crate) struct F32Gemm;

impl Precision for F32Gemm {
    const NAME: &'static str = "f32";
    const PANEL: usize = 1;
    type Weights<'w> = [f32];

    fn with_call_weights<R>(
        who: &str,
        w: &TensorView,
        _kind: Kind,
        _groups: usize,
        w_shape: &[usize],
        run: impl FnOnce(&[f32]) -> Result<R>,
    ) -> Result<R> {
        let shape: Vec<i64> = w_shape.iter().map(|&d| d as i64).collect();
        expect_shape(w, &format!("{who}: w"), &shape)?;
        run(&input::<f32>(w, &format!("{who}: w"))?)
    }

    fn weights_fit(w: &[f32], _kind: Kind, _groups: usize, w_shape: &[usize]) -> bool {
        w.len() == w_shape.iter().product::<usize>()
    }

    fn unpack_f32(w: &[f32], _kind: Kind, _groups: usize, _w_shape: &[usize], dst: &mut [f32]) {
        dst.copy_from_slice(w);
    }
}

/// A packed operand re-laid for AMX tiles, shared by the GEMMs of one call
/// that multiply the same weights (the tiles of a convolution, one per group):
/// the first that needs it re-lays it (`amx/`); elsewhere it stays empty.
pub(crate) type Relayed = std::sync::OnceLock<Vec<u32>>;

/// How many threads a kernel may use: the size of the current rayon pool.
pub(crate) fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// A mutable buffer that parallel jobs write through, each job to elements no
/// other job touches. Lengths are still checked on every access.
#[derive(Clone, Copy)]
pub(crate) struct SharedMut {
    ptr: *mut f32,
    len: usize,
}

// Jobs write disjoint elements (the invariant of every `unsafe` use below).
unsafe impl Send for SharedMut {}
unsafe impl Sync for SharedMut {}

impl SharedMut {
    pub fn new(s: &mut [f32]) -> Self {
        Self {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// The elements `start..start + n`, checked against the length.
    ///
    /// # Safety
    /// No other live reference may cover these elements.
    #[allow(clippy::mut_from_ref)] // the point of this type; see the safety contract
    pub unsafe fn slice(
        &self,
        start: usize,
        n: usize,
    ) -> std::result::Result<&mut [f32], JobError> {
        match start.checked_add(n) {
            Some(end) if end <= self.len => {
                Ok(std::slice::from_raw_parts_mut(self.ptr.add(start), n))
            }
            _ => Err(JobError::new(format!(
                "range {start}+{n} outside a buffer of {}",
                self.len
            ))),
        }
    }

    /// Checks that the elements `start..start + n` are inside the buffer.
    pub fn check(&self, start: usize, n: usize) -> std::result::Result<(), JobError> {
        match start.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(JobError::new(format!(
                "range {start}+{n} outside a buffer of {}",
                self.len
            ))),
        }
    }

    /// A raw pointer to element `start`, for kernels that [`check`](Self::check)ed their range.
    pub fn ptr_at(&self, start: usize) -> *mut f32 {
        self.ptr.wrapping_add(start)
    }
}

/// `dst = (accumulate ? dst : 0) + a @ b` with `a: m x k`, `b: k x n`, `dst: m x n`.
///
/// `parallel` lets the `gemm` crate split the product over the rayon pool;
/// callers that already run one job per thread pass `false`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    al: Layout,
    b: &[f32],
    bl: Layout,
    dst: &mut [f32],
    dl: Layout,
    accumulate: bool,
    parallel: bool,
) -> std::result::Result<(), JobError> {
    let shared = SharedMut::new(dst);
    // SAFETY: `dst` is borrowed mutably for the whole call.
    unsafe { sgemm_shared(m, n, k, a, al, b, bl, shared, dl, accumulate, parallel) }
}

/// The largest `m·n` the crate multiplies with dot products across K.
const HORIZONTAL_MAX: usize = 16 * 16;

/// [`sgemm`] into a [`SharedMut`].
///
/// # Safety
/// While this runs, nothing else may read or write the destination elements
/// `dl.offset + i * dl.rs + j * dl.cs` (`i < m`, `j < n`), and those elements
/// must be pairwise distinct (`rs`/`cs` do not make them alias).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_shared(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    al: Layout,
    b: &[f32],
    bl: Layout,
    dst: SharedMut,
    dl: Layout,
    accumulate: bool,
    parallel: bool,
) -> std::result::Result<(), JobError> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    check_fits(dst.len, dl, m, n, "destination")?;
    // Distinct destination elements: rows apart by a whole row, or columns by a
    // whole column.
    let rows_apart = dl.cs >= 1 && (m == 1 || dl.rs >= n.saturating_mul(dl.cs));
    let cols_apart = dl.rs >= 1 && (n == 1 || dl.cs >= m.saturating_mul(dl.rs));
    if !(rows_apart || cols_apart || (m == 1 && n == 1)) {
        return Err(JobError::new(format!(
            "destination layout {dl:?} aliases its own elements"
        )));
    }
    if k > 0 {
        check_fits(a.len(), al, m, k, "left")?;
        check_fits(b.len(), bl, k, n, "right")?;
    }
    let too_big = |v: usize| v > isize::MAX as usize;
    if [dl.rs, dl.cs, al.rs, al.cs, bl.rs, bl.cs]
        .into_iter()
        .any(too_big)
    {
        return Err(JobError::new("stride overflows isize"));
    }
    let par = if parallel && threads() > 1 {
        gemm_common::Parallelism::Rayon(threads())
    } else {
        gemm_common::Parallelism::None
    };
    // With k == 0 the operands are never read; point them at the destination.
    let (ap, bp) = if k == 0 {
        (dst.ptr as *const f32, dst.ptr as *const f32)
    } else {
        (a.as_ptr().add(al.offset), b.as_ptr().add(bl.offset))
    };
    // gemm-f32's kernels walk the destination down its columns: a destination
    // laid out by rows is computed as its transpose, C^T = B^T A^T (the
    // operands swap, and each one's strides).
    let dp = dst.ptr.add(dl.offset);
    let (m, n, d, mut l, r) = if dl.cs < dl.rs {
        (n, m, (dl.rs, dl.cs), (bp, bl.rs, bl.cs), (ap, al.rs, al.cs))
    } else {
        (m, n, (dl.cs, dl.rs), (ap, al.cs, al.rs), (bp, bl.cs, bl.rs))
    };
    // The crate takes a small product whose operands both run along K
    // (m·n <= 256) with dot products across K, which sum in another order than
    // its packed kernels: the same row of ALBERT's attention scores alone and in
    // a padded batch would differ. Its left operand copied column-major sends it
    // to the packed kernels, which sum each output over K in order at any size.
    let column_major;
    if l.1 == 1 && r.2 == 1 && m > 1 && n > 1 && k > 2 && m * n <= HORIZONTAL_MAX {
        column_major = (0..k)
            .flat_map(|p| (0..m).map(move |i| (i, p)))
            .map(|(i, p)| *l.0.add(i * l.2 + p * l.1))
            .collect::<Vec<f32>>();
        l = (column_major.as_ptr(), m, 1);
    }
    gemm_f32::gemm::f32::get_gemm_fn()(
        m,
        n,
        k,
        dp,
        d.0 as isize,
        d.1 as isize,
        accumulate,
        l.0,
        l.1 as isize,
        l.2 as isize,
        r.0,
        r.1 as isize,
        r.2 as isize,
        1.0f32,
        1.0f32,
        false,
        false,
        false,
        par,
    );
    Ok(())
}
