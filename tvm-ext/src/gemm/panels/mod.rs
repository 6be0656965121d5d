//! The float32 matmul's weights, packed once, at compile time, into panels of
//! [`NR`] columns: `out = x × W (+ bias)`.
//!
//! The `gemm` crate packs its operands on every call unless they already come
//! in its micro-kernel's layout. For ALBERT's linear layers (tens to 500 rows
//! against 768 x 768 and 768 x 2048 weights) that copy of the weights cost about
//! as much as the products (perf: 23% of the text stage in its packing, against
//! 20% in its micro-kernel). A panel of 64 columns, K-major, is that layout (the
//! AVX-512 micro-kernel's 4 x 16 lanes), so the crate multiplies it in place:
//! the weights are packed by `kokoro_tvm_ext.pack_f32` when the checkpoint is
//! bound, and each call is one crate call per panel, the panels split over the
//! rayon pool. The same f32 products as the f32 matmul, nothing rounded.
//!
//! ```text
//! kokoro_tvm_ext.pack_f32(kind: "matmul", groups: 1, w: float32 [K, N])
//!     -> float32 [ceil(N / NR), K, NR]: panel p, row q, column c = W[q, p*NR + c] (zeros past N)
//! ```
//!
//! K goes to the crate in blocks of at most [`KB`] and a single row as two
//! copies, so a row's result never depends on the rows beside it (see
//! [`gemm_panels`]). Measured per call against the crate packing `[K, N]` weights
//! itself (`bench_gemm_panels`, one core, the fastest of 15 alternating rounds):
//! 1.04-1.38x as fast at 50 rows, 0.99-1.15x at 311. A register tile of our own
//! on the panels (6 x 64, the input regrouped per call) ran 5-20% slower than
//! the crate on them.
use rayon::prelude::*;
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, Tensor, TensorView, VALUE_ERROR};

use super::packed::{pack_args, Kind, PackArgs};
use super::{sgemm_shared, Layout, SharedMut};
use crate::interface;
use crate::job::JobError;
use crate::scratch::Scratch;
use crate::tensor::{expect_shape, input};

/// Columns of a panel: the height of the crate's AVX-512 micro-kernel (4 x 16 lanes).
pub const NR: usize = 64;
/// The longest block of K per crate call: the crate sums up to 512 whole at any row count.
const KB: usize = 512;

/// The registered `kokoro_tvm_ext.pack_f32`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The packed shape of `[k, n]` weights.
pub fn packed_shape(k: usize, n: usize) -> [i64; 3] {
    [n.div_ceil(NR) as i64, k as i64, NR as i64]
}

fn pack_packed(args: &[AnyView]) -> Result<Tensor> {
    let PackArgs { kind, w, shape, .. } = pack_args(&interface::PACK_F32, args)?;
    ensure!(
        kind == Kind::Matmul,
        VALUE_ERROR,
        "pack_f32: kind: only \"matmul\" weights are packed for the f32 kernels (convolutions take theirs as they are)"
    );
    let (k, n) = (shape[0], shape[1]);
    Tensor::from_slice(&pack(k, n, &w), &packed_shape(k, n))
}

/// `w` (`[k, n]`, row-major) in panels of [`NR`] columns, zeros past `n`.
pub fn pack(k: usize, n: usize, w: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; n.div_ceil(NR) * k * NR];
    if out.is_empty() {
        return out;
    }
    for (p, panel) in out.chunks_exact_mut(k * NR).enumerate() {
        let (j0, width) = (p * NR, NR.min(n - p * NR));
        for (q, row) in panel.chunks_exact_mut(NR).enumerate() {
            row[..width].copy_from_slice(&w[q * n + j0..][..width]);
        }
    }
    out
}

/// The packed weights of a call, after checking their shape.
pub(crate) fn packed_weights<'a>(
    who: &str,
    w: &TensorView,
    k: usize,
    n: usize,
) -> Result<std::borrow::Cow<'a, [f32]>> {
    if let Err(e) = expect_shape(w, &format!("{who}: w"), &packed_shape(k, n)) {
        bail!(
            VALUE_ERROR,
            "{} (weights packed by kokoro_tvm_ext.pack_f32)",
            e.message()
        );
    }
    input::<f32>(w, &format!("{who}: w"))
}

/// `out [rows, n] = x [rows, k] @ W + bias` with `W` packed by [`pack`]: the
/// `gemm` crate reading the panels in place, one call per panel, the panels
/// split over the rayon pool.
pub(crate) fn gemm_panels(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> std::result::Result<(), JobError> {
    if x.len() != rows * k
        || w.len() != n.div_ceil(NR) * k * NR
        || out.len() != rows * n
        || bias.is_some_and(|b| b.len() != n)
    {
        return Err(JobError::new(format!(
            "buffers of {}, {}, {} elements do not hold x {rows}x{k}, packed weights {k}x{n}, out {rows}x{n}",
            x.len(),
            w.len(),
            out.len()
        )));
    }
    if rows == 1 {
        // The crate multiplies a single row as a matrix-vector product, which
        // sums in another order: the row twice, as two rows, is the same row
        // as it is among many.
        let (mut x2, mut out2) = (Scratch::new(), Scratch::new());
        x2.set_len(2 * k);
        x2[..k].copy_from_slice(x);
        x2[k..].copy_from_slice(x);
        out2.set_len(2 * n);
        gemm_panels(2, k, n, &x2, w, bias, &mut out2)?;
        out.copy_from_slice(&out2[..n]);
        return Ok(());
    }
    match bias {
        Some(b) => {
            for row in out.chunks_exact_mut(n) {
                row.copy_from_slice(b);
            }
        }
        None if k == 0 => out.fill(0.0), // no products: the crate is never called
        None => {}
    }
    let c = SharedMut::new(out);
    // K in equal blocks of at most KB: the crate then sums each block whole,
    // whatever the row count (it blocks a longer K by a rule that depends on
    // the rows), so a row's result never depends on the other rows, and a
    // batch item equals its solo run bit for bit.
    let blocks = k.div_ceil(KB).max(1);
    let kb = k.div_ceil(blocks);
    (0..n.div_ceil(NR))
        .into_par_iter()
        .with_max_len(1)
        .try_for_each(|p| {
            let cols = NR.min(n - p * NR);
            for k0 in (0..k).step_by(kb.max(1)) {
                let depth = kb.min(k - k0);
                let panel = Layout {
                    offset: (p * k + k0) * NR,
                    rs: NR,
                    cs: 1,
                };
                let rows_of_x = Layout {
                    offset: k0,
                    rs: k,
                    cs: 1,
                };
                // SAFETY: each job writes columns p*NR..p*NR+cols of every row, no other job's.
                unsafe {
                    sgemm_shared(
                        rows,
                        cols,
                        depth,
                        x,
                        rows_of_x,
                        w,
                        panel,
                        c,
                        Layout::row_major(p * NR, n),
                        bias.is_some() || k0 > 0,
                        false,
                    )?;
                }
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests;
