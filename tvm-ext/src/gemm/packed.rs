//! What the two packed GEMMs share, bf16 ([`super::bf16`]) and int8
//! ([`super::int8`]): panels of `u32` words, each holding `G` consecutive
//! elements along the inner dimension K (two bf16s, four int8s); the register
//! tile that walks them; and the compile-time packer's arguments. Which
//! inner loop runs is the precision table's choice (`precision/table.rs`).
use std::borrow::Cow;

use rayon::prelude::*;
use tvm_ffi::{bail, ensure, AnyView, Result, VALUE_ERROR};

use super::{threads, SharedMut};
use crate::args::Cursor;
use crate::interface::Interface;
use crate::job::JobError;
use crate::tensor::{dim, input, shape_of};

/// Rows of a [`PackedA`] panel: the register tile's height.
pub const MR: usize = 8;
/// Columns of a [`PackedB`] panel: the register tile's width, two zmm vectors.
pub const NR: usize = 32;

/// The broadcast operand, `rows x k`, in panels of [`MR`] rows, `G` elements of
/// K per word: `data[(panel * ceil(k / G) + q) * MR + r]` holds
/// `A[panel*MR + r, G*q..G*q + G]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedA<'a, const G: usize> {
    pub data: &'a [u32],
    pub rows: usize,
    pub k: usize,
}

/// The vector operand, `k x cols`, in panels of [`NR`] columns, `G` elements of
/// K per word: `data[(panel * ceil(k / G) + q) * NR + c]` holds
/// `B[G*q..G*q + G, panel*NR + c]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedB<'a, const G: usize> {
    pub data: &'a [u32],
    pub cols: usize,
    pub k: usize,
}

impl<const G: usize> PackedA<'_, G> {
    /// `u32`s of a packed `rows x k` operand.
    pub const fn len(rows: usize, k: usize) -> usize {
        rows.div_ceil(MR) * k.div_ceil(G) * MR
    }
}

impl<'a, const G: usize> PackedB<'a, G> {
    /// `u32`s of a packed `k x cols` operand.
    pub const fn len(k: usize, cols: usize) -> usize {
        cols.div_ceil(NR) * k.div_ceil(G) * NR
    }

    /// The panels `p0..p1` as an operand of their own (the last one may be partial).
    pub fn panels(&self, p0: usize, p1: usize) -> std::result::Result<Self, JobError> {
        let n = self.k.div_ceil(G) * NR;
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

/// Where conv1d's packed inner index `l` comes from in torch's `[Cin/g, K]`
/// (`c * K + tap`), `None` for a padding channel, for a packing of `G`
/// elements per word. Both packings of conv1d's weights are tap-major,
/// `l = tap * G * ceil(Cin/g / G) + c`: a word holds `G` channels of one tap,
/// so the kernels read every tap of an input window packed once, at an offset.
pub(crate) fn conv_inner<const G: usize>(l: usize, cin_g: usize, taps: usize) -> Option<usize> {
    let per_tap = G * cin_g.div_ceil(G);
    let (tap, c) = (l / per_tap, l % per_tap);
    (c < cin_g).then_some(c * taps + tap)
}

/// The checks both GEMMs make before writing the row-major `m x n` block at
/// `c_offset` of `c` (`ldc` elements per row) from operands `a` and `b`, whose
/// inner dimension must agree and be at most `max_k`; `Ok(false)` when the
/// block is empty.
pub(crate) fn check_operands<const G: usize>(
    a: &PackedA<G>,
    b: &PackedB<G>,
    max_k: usize,
    c: &SharedMut,
    c_offset: usize,
    ldc: usize,
) -> std::result::Result<bool, JobError> {
    let (m, n, k) = (a.rows, b.cols, a.k);
    if a.k != b.k || k > max_k {
        return Err(JobError::new(format!(
            "inner dimensions {} and {} (at most {max_k})",
            a.k, b.k
        )));
    }
    if a.data.len() != PackedA::<G>::len(m, k) || b.data.len() != PackedB::<G>::len(k, n) {
        return Err(JobError::new(format!(
            "packed operands of {} and {} elements do not hold {m}x{k} and {k}x{n}",
            a.data.len(),
            b.data.len(),
        )));
    }
    check_block(m, n, c, c_offset, ldc)
}

/// The checks before writing the row-major `m x n` block at `c_offset` of `c`
/// (`ldc` elements per row); `Ok(false)` when the block is empty.
pub(crate) fn check_block(
    m: usize,
    n: usize,
    c: &SharedMut,
    c_offset: usize,
    ldc: usize,
) -> std::result::Result<bool, JobError> {
    if m == 0 || n == 0 {
        return Ok(false);
    }
    if m > 1 && ldc < n {
        return Err(JobError::new(format!(
            "ldc {ldc} < {n} columns: rows would alias"
        )));
    }
    // The block's first and last rows, checked against the buffer (the tiles
    // only write inside the block).
    c.check(c_offset, n)?;
    c.check(c_offset + (m - 1) * ldc, n)?;
    Ok(true)
}

/// Runs `job(i0..i1, j0..j1)` over rectangles of `mp x np` panels (of rows,
/// of columns) that cover them: one rectangle, or with `parallel` at least two
/// per thread where there are enough panels, spread over the rayon pool.
pub(crate) fn for_each_block(
    mp: usize,
    np: usize,
    parallel: bool,
    job: impl Fn(std::ops::Range<usize>, std::ops::Range<usize>) -> std::result::Result<(), JobError>
        + Sync,
) -> std::result::Result<(), JobError> {
    let want = if parallel { 2 * threads() } else { 1 };
    let nj = np.min(want);
    let ni = mp.min(want.div_ceil(nj));
    let block = |jid: usize| {
        let (bi, bj) = (jid / nj, jid % nj);
        job(
            bi * mp / ni..(bi + 1) * mp / ni,
            bj * np / nj..(bj + 1) * np / nj,
        )
    };
    if ni * nj > 1 {
        (0..ni * nj)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(block)
    } else {
        block(0)
    }
}

// ---------------------------------------------------------------------------
// The compile-time packers.
// ---------------------------------------------------------------------------

/// What a packed weight tensor holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Conv1d,
    Conv1dTranspose,
    Matmul,
}

/// A packer's checked arguments: weights `w` of `kind` in `groups`, with
/// torch's shape `shape` (no dimension empty, `groups` dividing the first).
pub(crate) struct PackArgs<'a> {
    pub kind: Kind,
    pub groups: usize,
    pub w: Cow<'a, [f32]>,
    pub shape: Vec<usize>,
}

/// Reads and checks the arguments of the packer `iface` (`pack_bf16`, `pack_int8`).
pub(crate) fn pack_args<'a>(
    iface: &'static Interface,
    args: &[AnyView<'a>],
) -> Result<PackArgs<'a>> {
    let who = iface.name;
    let mut c = Cursor::new(iface, args)?;
    let kind = match c.string("kind")?.as_str() {
        "conv1d" => Kind::Conv1d,
        "conv1d_transpose" => Kind::Conv1dTranspose,
        "matmul" => Kind::Matmul,
        other => bail!(
            VALUE_ERROR,
            "{who}: kind: expected \"conv1d\", \"conv1d_transpose\" or \"matmul\", got {other:?}"
        ),
    };
    let groups = c.int_in("groups", 1, i32::MAX as i64)? as usize;
    let w = c.tensor("w")?;
    c.finish()?;
    let rank = if kind == Kind::Matmul { 2 } else { 3 };
    let shape: Vec<usize> = shape_of(&w, &format!("{who}: w"), rank)?
        .iter()
        .map(|&d| dim(d))
        .collect();
    ensure!(
        shape.iter().all(|&d| d > 0),
        VALUE_ERROR,
        "{who}: w: expected no empty dimension, got shape {shape:?}"
    );
    ensure!(
        kind != Kind::Matmul || groups == 1,
        VALUE_ERROR,
        "{who}: groups: matmul weights have one group, got {groups}"
    );
    ensure!(
        shape[0].is_multiple_of(groups),
        VALUE_ERROR,
        "{who}: groups: {groups} does not divide the {} channels of w's first dimension",
        shape[0]
    );
    let w = input::<f32>(&w, &format!("{who}: w"))?;
    Ok(PackArgs {
        kind,
        groups,
        w,
        shape,
    })
}

/// Packed weights of a call as `u32` words of `N` elements `T` each (the
/// first in the low bits), borrowed where the tensor's data is 4-byte aligned.
pub(crate) fn as_words<'a, T: Copy, const N: usize>(
    data: Cow<'a, [T]>,
    word: impl Fn([T; N]) -> u32,
) -> Cow<'a, [u32]> {
    debug_assert_eq!(std::mem::size_of::<T>() * N, 4);
    match data {
        Cow::Borrowed(s) if (s.as_ptr() as usize).is_multiple_of(4) => {
            // SAFETY: 4-byte aligned, a multiple of N elements (the packed
            // tensors' last dimension is N), N elements of T are 4 bytes.
            Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(s.as_ptr() as *const u32, s.len() / N)
            })
        }
        s => Cow::Owned(
            s.chunks_exact(N)
                .map(|c| word(std::array::from_fn(|i| c[i])))
                .collect(),
        ),
    }
}
