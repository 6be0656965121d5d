//! Float32 matrix product with an optional bias, for ALBERT's and Kokoro's
//! linear layers.
//!
//! Global name: `kokoro_tvm_ext.matmul`, destination-passing, called packed
//! because `has_bias` decides whether the bias tensor is present:
//!
//! ```text
//! kokoro_tvm_ext.matmul(has_bias: 0/1,
//!   x:    float32 [..., K]   (rank >= 1, any strides; rows R = product of the leading dims)
//!   w:    float32 [K, N]     (any strides)
//!   bias: float32 [N]        -- only if has_bias
//!   OUT out: float32 [..., N] (x's leading dims, contiguous)
//! )   out = x @ w + bias
//! ```
//!
//! The output columns are split into blocks, one rayon job each (two per thread
//! when wide enough, for balance on a busy machine): a job fills its block with
//! the bias and accumulates `x @ w[:, block]` into it with one single-threaded
//! call of the `gemm` crate (AVX-512 kernels), reading only its share of the
//! weights. Narrow outputs use one `gemm` call split over the pool instead.
//! [`matmul_forward`] is the same kernel for plain Rust callers.
//!
//! This folder holds every matmul: this one, the batched product of two
//! activations ([`batch`]: `batch_matmul`) and the `precision="bf16"` variant
//! ([`bf16`]: `matmul_bf16`, which shares this one's parsing); all of them run
//! on the GEMMs of [`crate::gemm`]. `testing.rs` holds what their tests share.
use std::borrow::Cow;

use tvm_ffi::{bail, ensure, AnyView, Function, Result, TensorView, VALUE_ERROR};

use rayon::prelude::*;

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::gemm::{sgemm_shared, threads, Layout, SharedMut};
use crate::interface::{self, Interface};
use crate::job::{internal, JobError};
use crate::tensor::{byte_span, check_dtype, dim, expect_shape, input, output, shape_of, Bf16};

pub mod batch;
pub mod bf16;
pub mod int8;
mod packed;
pub mod panels;
#[cfg(test)]
pub(crate) mod testing;

/// The registered function.
pub fn function() -> Function {
    dps_function(matmul_packed)
}

/// One parsed call: `x [rows, k] @ w -> out [rows, n]`, and its tensors.
pub(crate) struct MatmulCall {
    pub rows: usize,
    pub k: usize,
    pub n: usize,
    pub x: TensorView,
    pub w: TensorView,
    pub bias: Option<TensorView>,
    pub out: TensorView,
}

/// What a matmul call's `w` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeightKind {
    /// float32 `[K, N]`.
    Torch,
    /// bf16 packed by `kokoro_tvm_ext.pack_bf16` ([`bf16`]).
    Bf16,
    /// int8 packed by `kokoro_tvm_ext.pack_int8` ([`int8`]).
    Int8,
    /// float32 in panels by `kokoro_tvm_ext.pack_f32` ([`panels`]).
    Panels,
}

/// Parses and validates the packed arguments of `matmul`, or of `matmul_bf16`
/// / `matmul_int8`, whose `w` is packed (the caller checks its shape) and
/// whose `n` comes from `out`.
pub(crate) fn parse_call(
    iface: &'static Interface,
    args: &[AnyView],
    weights: WeightKind,
) -> Result<MatmulCall> {
    let packed = weights != WeightKind::Torch;
    let who = iface.name;
    let mut c = Cursor::new(iface, args)?;
    c.flag("has_bias")?;
    let x = c.tensor("x")?;
    let w = c.tensor("w")?;
    let bias = c.optional_tensor("bias")?;
    let out = c.output("out")?;
    c.finish()?;
    check_dtype::<f32>(&x, &format!("{who}: x"))?;
    if weights == WeightKind::Bf16 {
        check_dtype::<Bf16>(&w, &format!("{who}: w"))?;
    } else if weights == WeightKind::Int8 {
        check_dtype::<i8>(&w, &format!("{who}: w"))?;
    } else {
        check_dtype::<f32>(&w, &format!("{who}: w"))?;
    }
    if let Some(b) = &bias {
        check_dtype::<f32>(b, &format!("{who}: bias"))?;
    }
    check_dtype::<f32>(&out, &format!("{who}: out"))?;

    let xs = x.shape().to_vec();
    ensure!(
        !xs.is_empty(),
        VALUE_ERROR,
        "{who}: x: expected rank >= 1, got rank 0"
    );
    let k = xs[xs.len() - 1];
    let n = if packed {
        *shape_of(&out, &format!("{who}: out"), xs.len())?
            .last()
            .unwrap_or(&0)
    } else {
        let n = shape_of(&w, &format!("{who}: w"), 2)?[1];
        expect_shape(&w, &format!("{who}: w"), &[k, n])?;
        n
    };
    if let Some(b) = &bias {
        expect_shape(b, &format!("{who}: bias"), &[n])?;
    }
    let mut os = xs.clone();
    let last = os.len() - 1;
    os[last] = n;
    expect_shape(&out, &format!("{who}: out"), &os)?;
    let rows = match xs[..xs.len() - 1]
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(dim(d)))
    {
        Some(r) => r,
        None => bail!(
            VALUE_ERROR,
            "{who}: x: the row count of shape {:?} overflows",
            xs
        ),
    };
    crate::counters::note(|| {
        let weight_bytes = match weights {
            WeightKind::Bf16 => 2,
            WeightKind::Int8 => 1,
            WeightKind::Torch | WeightKind::Panels => 4,
        };
        crate::counters::matmul_work(rows as u64, dim(k) as u64, dim(n) as u64, weight_bytes)
    });
    Ok(MatmulCall {
        rows,
        k: dim(k),
        n: dim(n),
        x,
        w,
        bias,
        out,
    })
}

/// The data of `x`, `bias` and `out`, after checking that `out` overlaps none
/// of the inputs (`w` too).
#[allow(clippy::type_complexity)]
pub(crate) fn call_data<'a>(
    who: &str,
    c: &MatmulCall,
) -> Result<(Cow<'a, [f32]>, Option<Cow<'a, [f32]>>, &'a mut [f32])> {
    let xd = input::<f32>(&c.x, &format!("{who}: x"))?;
    let bd = match &c.bias {
        Some(b) => Some(input::<f32>(b, &format!("{who}: bias"))?),
        None => None,
    };
    let od = output::<f32>(&c.out, &format!("{who}: out"))?;
    let ins = [
        ("x", span(&xd)),
        ("w", byte_span(&c.w)),
        ("bias", bd.as_deref().and_then(span)),
    ];
    no_overlap(who, &[("out", span(od))], &ins)?;
    Ok((xd, bd, od))
}

/// The check a matmul on packed weights (bf16, int8) makes of its buffers
/// (`w_fits`: whether the packed weights have the length `k x n` asks for).
pub(crate) fn expect_packed_call(
    who: &str,
    (rows, k, n): (usize, usize, usize),
    x: &[f32],
    w_fits: bool,
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<()> {
    ensure!(
        x.len() == rows * k && w_fits && bias.is_none_or(|b| b.len() == n) && out.len() == rows * n,
        VALUE_ERROR,
        "{who}: buffer lengths do not match rows={rows}, k={k}, n={n}"
    );
    Ok(())
}

/// Every row of `out` (`n` long) set to `bias`, where there is one, for a
/// GEMM to add to.
pub(crate) fn prefill_bias(out: &mut [f32], n: usize, bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in out.chunks_exact_mut(n) {
            row.copy_from_slice(b);
        }
    }
}

/// Parses and validates the packed arguments, then runs [`matmul_forward`].
pub fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul";
    let c = parse_call(&interface::MATMUL, args, WeightKind::Torch)?;
    let (x, bias, out) = call_data(WHO, &c)?;
    let w = input::<f32>(&c.w, "matmul: w")?;
    matmul_forward(c.rows, c.k, c.n, &x, &w, bias.as_deref(), out)
}

/// `out [rows, n] = x [rows, k] @ w [k, n] + bias [n]`, dense row-major.
pub fn matmul_forward(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let len = |dims: &[usize]| dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    for (name, got, dims) in [
        ("x", x.len(), [rows, k]),
        ("w", w.len(), [k, n]),
        ("out", out.len(), [rows, n]),
    ] {
        ensure!(
            len(&dims) == Some(got),
            VALUE_ERROR,
            "matmul: {name}: expected {:?} elements, got {got}",
            dims
        );
    }
    if let Some(b) = bias {
        ensure!(
            b.len() == n,
            VALUE_ERROR,
            "matmul: bias: expected {n} elements, got {}",
            b.len()
        );
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let parts = column_parts(n, threads());
    let out = SharedMut::new(out);
    // One job per block of output columns: it fills its block with the bias and
    // multiplies x by its block of w, reading only that part of the weights.
    let job = |p: usize, parallel: bool| -> std::result::Result<(), JobError> {
        let width = n.div_ceil(parts);
        let n0 = p * width;
        let nn = width.min(n - n0);
        if let Some(b) = bias {
            for r in 0..rows {
                // SAFETY: this job alone owns columns n0..n0+nn of every row.
                unsafe { out.slice(r * n + n0, nn)? }.copy_from_slice(&b[n0..n0 + nn]);
            }
        }
        // SAFETY: as above.
        unsafe {
            sgemm_shared(
                rows,
                nn,
                k,
                x,
                Layout::row_major(0, k),
                w,
                Layout::row_major(n0, n),
                out,
                Layout::row_major(n0, n),
                bias.is_some(),
                parallel,
            )
        }
    };
    let r = if parts > 1 {
        (0..parts)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(|p| job(p, false))
    } else {
        job(0, true)
    };
    r.map_err(|e| internal("matmul", e))
}

/// How many column blocks to split `n` output columns into: two per thread when
/// the blocks stay at least 128 wide (so a busy core delays less), one per
/// thread when they stay at least 64 wide, else one block for a GEMM that
/// splits itself.
fn column_parts(n: usize, threads: usize) -> usize {
    if threads <= 1 {
        1
    } else if n / (2 * threads) >= 128 {
        2 * threads
    } else if n / threads >= 64 {
        threads
    } else {
        1
    }
}

#[cfg(test)]
mod tests;
