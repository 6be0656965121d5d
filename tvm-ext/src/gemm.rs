//! Shared by `conv.rs` and `matmul.rs`: a bounds-checked float32 GEMM over the
//! `gemm` crate (AVX-512 / AVX2 kernels picked at run time, rayon parallelism on
//! the current pool) and the parsing of packed prim-int / tensor arguments.
//!
//! Matrices are described by a [`Layout`] into a slice: element `(i, j)` lives at
//! `offset + i * rs + j * cs`. Every call checks that the last element of each
//! matrix is inside its slice, so a planning mistake becomes an error, never an
//! out-of-bounds access.
use tvm_ffi::{bail, ensure, AnyView, Result, TensorView, INTERNAL_ERROR, TYPE_ERROR, VALUE_ERROR};

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
        Self { offset, rs: ld, cs: 1 }
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

/// An error raised inside a (possibly parallel) kernel job; `Send`, unlike
/// `tvm_ffi::Error`. Converted with [`internal`].
#[derive(Debug)]
pub(crate) struct JobError(pub String);

/// Turns a [`JobError`] into an internal error of the function `who`.
pub(crate) fn internal(who: &str, e: JobError) -> tvm_ffi::Error {
    let context = String::new();
    tvm_ffi::Error::new(INTERNAL_ERROR, &format!("{who}: internal error: {}", e.0), &context)
}

fn check_fits(len: usize, l: Layout, rows: usize, cols: usize, what: &str) -> std::result::Result<(), JobError> {
    match l.end(rows, cols) {
        Some(end) if end <= len => Ok(()),
        _ => Err(JobError(format!(
            "{what} matrix {rows}x{cols} at {l:?} does not fit a buffer of {len} elements"
        ))),
    }
}

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
    pub unsafe fn slice(&self, start: usize, n: usize) -> std::result::Result<&mut [f32], JobError> {
        match start.checked_add(n) {
            Some(end) if end <= self.len => Ok(std::slice::from_raw_parts_mut(self.ptr.add(start), n)),
            _ => Err(JobError(format!("range {start}+{n} outside a buffer of {}", self.len))),
        }
    }

    /// Checks that the elements `start..start + n` are inside the buffer.
    pub fn check(&self, start: usize, n: usize) -> std::result::Result<(), JobError> {
        match start.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(JobError(format!("range {start}+{n} outside a buffer of {}", self.len))),
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
        return Err(JobError(format!("destination layout {dl:?} aliases its own elements")));
    }
    if k > 0 {
        check_fits(a.len(), al, m, k, "left")?;
        check_fits(b.len(), bl, k, n, "right")?;
    }
    let too_big = |v: usize| v > isize::MAX as usize;
    if [dl.rs, dl.cs, al.rs, al.cs, bl.rs, bl.cs].into_iter().any(too_big) {
        return Err(JobError("stride overflows isize".into()));
    }
    let par = if parallel && threads() > 1 {
        gemm::Parallelism::Rayon(threads())
    } else {
        gemm::Parallelism::None
    };
    // With k == 0 the operands are never read; point them at the destination.
    let (ap, bp) = if k == 0 {
        (dst.ptr as *const f32, dst.ptr as *const f32)
    } else {
        (a.as_ptr().add(al.offset), b.as_ptr().add(bl.offset))
    };
    gemm::gemm(
        m,
        n,
        k,
        dst.ptr.add(dl.offset),
        dl.cs as isize,
        dl.rs as isize,
        accumulate,
        ap,
        al.cs as isize,
        al.rs as isize,
        bp,
        bl.cs as isize,
        bl.rs as isize,
        1.0f32,
        1.0f32,
        false,
        false,
        false,
        par,
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Scratch buffers.
// ---------------------------------------------------------------------------

/// Buffers kept between calls, so that repeated kernel calls neither ask the
/// allocator for fresh pages (page faults dominate large, short-lived buffers)
/// nor zero them needlessly.
static POOL: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());
/// At most this many buffers are kept...
const POOL_BUFFERS: usize = 8;
/// ...each of at most this many elements (8 MiB); kernels size their blocks
/// to about 1 MiB, so the pool stays small.
const POOL_MAX_LEN: usize = 2 << 20;

/// A buffer taken from the pool and given back when dropped. It derefs to its
/// first `len` elements; the `Vec` behind it stays as long as it ever was, so
/// a reused buffer is never zeroed again (3.6% of a short synthesis was
/// `memset` of im2col blocks that were overwritten next).
pub(crate) struct Scratch {
    buf: Vec<f32>,
    len: usize,
}

impl Scratch {
    /// An empty buffer, for a job whose size is not known yet: the largest pooled
    /// buffer, which is the least likely to need growing.
    pub fn new() -> Self {
        let taken = POOL.lock().ok().and_then(|mut p| {
            let i = p.iter().enumerate().max_by_key(|(_, v)| v.len()).map(|(i, _)| i)?;
            Some(p.swap_remove(i))
        });
        Scratch { buf: taken.unwrap_or_default(), len: 0 }
    }

    /// Sets the length to `len`; the contents are unspecified (but initialised).
    pub fn set_len(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.resize(len, 0.0);
        }
        self.len = len;
        // Tests see NaN wherever a kernel would read what it did not write.
        #[cfg(test)]
        self.buf[..len].fill(f32::NAN);
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.buf);
        if v.is_empty() || v.len() > POOL_MAX_LEN {
            return;
        }
        if let Ok(mut p) = POOL.lock() {
            if p.len() < POOL_BUFFERS {
                p.push(v);
            } else if let Some((i, _)) = p.iter().enumerate().min_by_key(|(_, b)| b.len()) {
                // Keep the larger buffers: they are the costly ones to fault in.
                if p[i].len() < v.len() {
                    p[i] = v;
                }
            }
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}

// ---------------------------------------------------------------------------
// Packed arguments.
// ---------------------------------------------------------------------------

/// A prim int argument; `what` is the full argument name, e.g. "conv1d: stride".
pub(crate) fn int_arg(arg: AnyView, what: &str) -> Result<i64> {
    match i64::try_from(arg) {
        Ok(v) => Ok(v),
        Err(e) => bail!(TYPE_ERROR, "{what}: expected an int, {}", e.message()),
    }
}

/// A prim int argument that must lie in `lo..=hi`.
pub(crate) fn int_in(arg: AnyView, what: &str, lo: i64, hi: i64) -> Result<i64> {
    let v = int_arg(arg, what)?;
    ensure!(
        (lo..=hi).contains(&v),
        VALUE_ERROR,
        "{what}: expected a value in [{lo}, {hi}], got {v}"
    );
    Ok(v)
}

/// A 0/1 flag argument.
pub(crate) fn flag_arg(arg: AnyView, what: &str) -> Result<bool> {
    let v = int_arg(arg, what)?;
    ensure!(v == 0 || v == 1, VALUE_ERROR, "{what}: expected 0 or 1, got {v}");
    Ok(v == 1)
}

/// A tensor argument.
pub(crate) fn tensor_arg(arg: AnyView, what: &str) -> Result<TensorView> {
    match TensorView::try_from(arg) {
        Ok(t) => Ok(t),
        Err(e) => bail!(TYPE_ERROR, "{what}: expected a tensor, {}", e.message()),
    }
}

/// Byte range of a slice, `None` when empty.
pub(crate) fn span<T>(s: &[T]) -> Option<(usize, usize)> {
    if s.is_empty() {
        None
    } else {
        let start = s.as_ptr() as usize;
        Some((start, start + std::mem::size_of_val(s)))
    }
}

/// Whether two byte ranges share memory.
pub(crate) fn overlaps(a: Option<(usize, usize)>, b: Option<(usize, usize)>) -> bool {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], al: Layout, b: &[f32], bl: Layout) -> Vec<f64> {
        let mut out = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for l in 0..k {
                    s += a[al.offset + i * al.rs + l * al.cs] as f64 * b[bl.offset + l * bl.rs + j * bl.cs] as f64;
                }
                out[i * n + j] = s;
            }
        }
        out
    }

    #[test]
    fn strided_layouts_and_accumulation() {
        for &(m, n, k, par) in &[
            (1, 1, 1, false),
            (7, 5, 3, true),
            (33, 17, 65, false),
            (70, 90, 40, true),
            (3, 4, 0, false),
        ] {
            let a: Vec<f32> = (0..2 + m * k * 2).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1).collect();
            let b: Vec<f32> = (0..3 + k * n * 3).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1).collect();
            // a transposed (column-major) at offset 2, b with a column stride of 3.
            let al = Layout {
                offset: 2,
                rs: 1,
                cs: m.max(1),
            };
            let bl = Layout {
                offset: 3,
                rs: 3 * n,
                cs: 3,
            };
            let want = naive(m, n, k, &a, al, &b, bl);
            let mut dst = vec![1.0f32; m * n + 4];
            sgemm(m, n, k, &a, al, &b, bl, &mut dst, Layout::row_major(4, n), true, par).unwrap();
            assert_eq!(&dst[..4], &[1.0; 4]);
            for (g, w) in dst[4..].iter().zip(&want) {
                assert!((*g as f64 - (w + 1.0)).abs() < 1e-4, "{m}x{n}x{k}: {g} vs {}", w + 1.0);
            }
            sgemm(m, n, k, &a, al, &b, bl, &mut dst, Layout::row_major(4, n), false, par).unwrap();
            for (g, w) in dst[4..].iter().zip(&want) {
                assert!((*g as f64 - w).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn out_of_bounds_layouts_are_refused() {
        let a = vec![0.0f32; 6];
        let b = vec![0.0f32; 6];
        let mut d = vec![0.0f32; 4];
        let err = sgemm(
            2,
            2,
            3,
            &a,
            Layout::row_major(0, 3),
            &b,
            Layout::row_major(0, 2),
            &mut d,
            Layout::row_major(1, 2),
            false,
            false,
        )
        .unwrap_err();
        assert!(err.0.contains("destination"), "{}", err.0);
        let err = sgemm(
            2,
            2,
            3,
            &a,
            Layout::row_major(1, 3),
            &b,
            Layout::row_major(0, 2),
            &mut d,
            Layout::row_major(0, 2),
            false,
            false,
        )
        .unwrap_err();
        assert!(err.0.contains("left"), "{}", err.0);
        let mut d = vec![0.0f32; 8];
        let err = sgemm(
            2,
            2,
            3,
            &a,
            Layout::row_major(0, 3),
            &b,
            Layout::row_major(0, 2),
            &mut d,
            Layout::row_major(0, 1),
            false,
            false,
        )
        .unwrap_err();
        assert!(err.0.contains("aliases"), "{}", err.0);
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// `cargo test --release -p tvm-ext bench_gemm -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_gemm() {
        for &(m, n, k) in &[
            (512usize, 512usize, 512usize),
            (128, 256, 896),
            (2560, 208, 1024),
            (64, 512, 512),
            (64, 768, 768),
            (64, 3072, 768),
            (64, 768, 3072),
            (510, 768, 128),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0.0f32; m * n];
            for par in [false, true] {
                let flops = 2.0 * (m * n * k) as f64;
                let reps = ((4e9 / flops) as usize).max(3);
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        sgemm(
                            m,
                            n,
                            k,
                            &a,
                            Layout::row_major(0, k),
                            &b,
                            Layout::row_major(0, n),
                            &mut c,
                            Layout::row_major(0, n),
                            false,
                            par,
                        )
                        .unwrap();
                    }
                    best = best.min(t.elapsed().as_secs_f64() / reps as f64);
                }
                let mut best2 = f64::MAX;
                for _ in 0..3 {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        unsafe {
                            matrixmultiply::sgemm(
                                m,
                                k,
                                n,
                                1.0,
                                a.as_ptr(),
                                k as isize,
                                1,
                                b.as_ptr(),
                                n as isize,
                                1,
                                0.0,
                                c.as_mut_ptr(),
                                n as isize,
                                1,
                            );
                        }
                    }
                    best2 = best2.min(t.elapsed().as_secs_f64() / reps as f64);
                }
                println!(
                    "{m}x{n}x{k} par={par}: gemm {:.1} GFLOP/s, matrixmultiply {:.1} GFLOP/s",
                    flops / best / 1e9,
                    flops / best2 / 1e9
                );
            }
        }
    }
}
