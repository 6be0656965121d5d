//! Float32 batched matrix product of two activations, for ALBERT's attention
//! (`scores = q @ k^T`, `context = probs @ v`, 12 heads per batch item).
//!
//! Global name: `kokoro_tvm_ext.batch_matmul`, destination-passing:
//!
//! ```text
//! kokoro_tvm_ext.batch_matmul(trans_x: 0/1, trans_y: 0/1,
//!   x: float32 [..., M, K]   ([..., K, M] if trans_x; any strides, read in place)
//!   y: float32 [..., K, N]   ([..., N, K] if trans_y; any strides, read in place)
//!   OUT out: float32 [..., M, N] (contiguous)
//! )   out = op(x) @ op(y),  op(a) = a with its last two dims swapped if trans
//! ```
//!
//! The batch dimensions (all but the last two) broadcast as in numpy: aligned
//! from the right, a missing dimension or one of size 1 repeats the operand.
//! `out`'s batch dimensions must be the broadcast shape.
//!
//! How it runs: one job per (batch item, block of rows of `out`), at least two
//! jobs per thread when the rows allow blocks of 16 or more; each job is one
//! single-threaded call of the `gemm` crate, which reads both operands through
//! their strides (so a transposed view costs no copy). With fewer jobs than
//! threads, the jobs run one after another and each GEMM uses the whole pool.
use rayon::prelude::*;
use tvm_ffi::{bail, ensure, AnyView, Function, Result, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::gemm::{sgemm_shared, threads, Layout, SharedMut};
use crate::interface;
use crate::job::{internal, JobError};
use crate::tensor::{check_dtype, expect_shape, output, strided_input};

const WHO: &str = "batch_matmul";

/// The registered function.
pub fn function() -> Function {
    dps_function(batch_matmul_packed)
}

/// One operand of [`batch_matmul_forward`]: element `(b, i, j)` of its matrix
/// stack lives at `data[offsets[b] + i * rs + j * cs]`.
#[derive(Clone, Debug)]
pub struct Operand<'a> {
    pub data: &'a [f32],
    /// Per batch item of `out`, where the item's matrix starts.
    pub offsets: Vec<usize>,
    /// Elements between rows.
    pub rs: usize,
    /// Elements between columns.
    pub cs: usize,
}

/// Parses and validates the packed arguments, then runs [`batch_matmul_forward`].
pub fn batch_matmul_packed(args: &[AnyView]) -> Result<()> {
    let mut c = Cursor::new(&interface::BATCH_MATMUL, args)?;
    let trans_x = c.flag("trans_x")?;
    let trans_y = c.flag("trans_y")?;
    let x = c.tensor("x")?;
    let y = c.tensor("y")?;
    let out = c.output("out")?;
    c.finish()?;
    check_dtype::<f32>(&out, "batch_matmul: out")?;
    let xv = strided_input::<f32>(&x, "batch_matmul: x")?;
    let yv = strided_input::<f32>(&y, "batch_matmul: y")?;
    for (name, rank) in [("x", xv.shape.len()), ("y", yv.shape.len())] {
        ensure!(
            rank >= 2,
            VALUE_ERROR,
            "{WHO}: {name}: expected rank >= 2, got rank {rank}"
        );
    }
    // The matrix dims and their strides, after the optional transposes.
    let last2 = |shape: &[usize], strides: &[usize], trans: bool| {
        let r = shape.len();
        let (rows, cols, rs, cs) = (shape[r - 2], shape[r - 1], strides[r - 2], strides[r - 1]);
        if trans {
            (cols, rows, cs, rs)
        } else {
            (rows, cols, rs, cs)
        }
    };
    let (m, k, xrs, xcs) = last2(&xv.shape, &xv.strides, trans_x);
    let (ky, n, yrs, ycs) = last2(&yv.shape, &yv.strides, trans_y);
    ensure!(
        k == ky,
        VALUE_ERROR,
        "{WHO}: y: the inner dimensions differ: x {:?} (trans_x={}) has K={k}, y {:?} (trans_y={}) has K={ky}",
        x.shape(),
        trans_x as i32,
        y.shape(),
        trans_y as i32
    );
    let xb = &xv.shape[..xv.shape.len() - 2];
    let yb = &yv.shape[..yv.shape.len() - 2];
    let batch = match broadcast(xb, yb) {
        Some(b) => b,
        None => bail!(
            VALUE_ERROR,
            "{WHO}: the batch dimensions of x {:?} and y {:?} do not broadcast",
            x.shape(),
            y.shape()
        ),
    };
    let mut os: Vec<i64> = batch.iter().map(|&d| d as i64).collect();
    os.extend([m as i64, n as i64]);
    expect_shape(&out, "batch_matmul: out", &os)?;
    crate::counters::note(|| {
        let b = batch.iter().product::<usize>() as u64;
        let (m, n, k) = (m as u64, n as u64, k as u64);
        crate::counters::Work {
            class: "attention matmul",
            flops: 2 * b * m * n * k,
            bytes: 4 * b * (m * k + k * n + m * n),
        }
    });
    let od = output::<f32>(&out, "batch_matmul: out")?;
    no_overlap(
        WHO,
        &[("out", span(od))],
        &[("x", span(xv.data)), ("y", span(yv.data))],
    )?;
    let xo = Operand {
        data: xv.data,
        offsets: batch_offsets(&batch, xb, &xv.strides),
        rs: xrs,
        cs: xcs,
    };
    let yo = Operand {
        data: yv.data,
        offsets: batch_offsets(&batch, yb, &yv.strides),
        rs: yrs,
        cs: ycs,
    };
    batch_matmul_forward(m, n, k, &xo, &yo, od)
}

/// The numpy broadcast of two batch shapes, `None` if they clash.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (p, q) if p == q || q == 1 => Some(p),
            (1, q) => Some(q),
            _ => None,
        })
        .collect()
}

/// Where each batch item (row-major over `batch`) of an operand with batch
/// dims `dims` and element strides `strides` (its full strides; only the
/// leading `dims.len()` are used) starts. Broadcast dims contribute nothing.
fn batch_offsets(batch: &[usize], dims: &[usize], strides: &[usize]) -> Vec<usize> {
    let skip = batch.len() - dims.len();
    let count: usize = batch.iter().product();
    let mut offsets = Vec::with_capacity(count);
    let mut index = vec![0usize; batch.len()];
    for _ in 0..count {
        let off = (skip..batch.len())
            .map(|i| {
                if dims[i - skip] == 1 {
                    0
                } else {
                    index[i] * strides[i - skip]
                }
            })
            .sum();
        offsets.push(off);
        for d in (0..batch.len()).rev() {
            index[d] += 1;
            if index[d] < batch[d] {
                break;
            }
            index[d] = 0;
        }
    }
    offsets
}

/// `out[b] = x[b] @ y[b]` for every batch item `b` (`x[b]` is `m x k`, `y[b]`
/// is `k x n`), `out` dense `[batch, m, n]` with `batch = x.offsets.len()`.
pub fn batch_matmul_forward(
    m: usize,
    n: usize,
    k: usize,
    x: &Operand,
    y: &Operand,
    out: &mut [f32],
) -> Result<()> {
    let nb = x.offsets.len();
    ensure!(
        y.offsets.len() == nb,
        VALUE_ERROR,
        "{WHO}: x has {nb} batch items, y has {}",
        y.offsets.len()
    );
    let want = nb.checked_mul(m).and_then(|v| v.checked_mul(n));
    ensure!(
        want == Some(out.len()),
        VALUE_ERROR,
        "{WHO}: out: expected {nb} x {m} x {n} elements, got {}",
        out.len()
    );
    if out.is_empty() {
        return Ok(());
    }
    let threads = threads();
    // Row blocks per batch item: enough for two jobs per thread, but no
    // narrower than 16 rows (the GEMM's efficiency drops below that).
    let tiles = (2 * threads).div_ceil(nb).min(m.div_ceil(16)).max(1);
    let tile = m.div_ceil(tiles);
    let tiles = m.div_ceil(tile);
    let jobs = nb * tiles;
    let job_parallel = threads > 1 && jobs >= threads;
    let dst = SharedMut::new(out);
    let job = |i: usize, parallel: bool| -> std::result::Result<(), JobError> {
        let (b, t) = (i / tiles, i % tiles);
        let m0 = t * tile;
        let mt = tile.min(m - m0);
        let xl = Layout {
            offset: x.offsets[b] + m0 * x.rs,
            rs: x.rs,
            cs: x.cs,
        };
        let yl = Layout {
            offset: y.offsets[b],
            rs: y.rs,
            cs: y.cs,
        };
        // SAFETY: this job alone writes rows m0..m0+mt of batch item b.
        unsafe {
            sgemm_shared(
                mt,
                n,
                k,
                x.data,
                xl,
                y.data,
                yl,
                dst,
                Layout::row_major((b * m + m0) * n, n),
                false,
                parallel,
            )
        }
    };
    let r = if job_parallel {
        (0..jobs)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(|i| job(i, false))
    } else {
        (0..jobs).try_for_each(|i| job(i, threads > 1))
    };
    r.map_err(|e| internal(WHO, e))
}

#[cfg(test)]
mod tests;
