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
//! One call of the `gemm` crate (AVX-512 kernels, split over rayon's global pool
//! when the product is large enough), accumulating into `out` prefilled with
//! the bias. [`matmul_forward`] is the same kernel for plain Rust callers.
use tvm_ffi::{ensure, Any, AnyView, Function, Result, VALUE_ERROR};

use crate::gemm::{flag_arg, internal, overlaps, sgemm, span, tensor_arg, Layout};
use crate::tensor::{check_dtype, expect_shape, input, output, shape_of};

/// The registered function.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        matmul_packed(args)?;
        Ok(Any::default())
    })
}

/// Parses and validates the packed arguments, then runs [`matmul_forward`].
pub fn matmul_packed(args: &[AnyView]) -> Result<()> {
    ensure!(!args.is_empty(), VALUE_ERROR, "matmul: expected at least 1 argument (has_bias), got 0");
    let has_bias = flag_arg(args[0], "matmul: has_bias")?;
    let expected = 4 + has_bias as usize;
    ensure!(
        args.len() == expected,
        VALUE_ERROR,
        "matmul: expected {expected} arguments with has_bias={}, got {}",
        has_bias as i32,
        args.len()
    );
    let x = tensor_arg(args[1], "matmul: x")?;
    let w = tensor_arg(args[2], "matmul: w")?;
    let bias = if has_bias { Some(tensor_arg(args[3], "matmul: bias")?) } else { None };
    let out = tensor_arg(args[expected - 1], "matmul: out")?;
    check_dtype::<f32>(&x, "matmul: x")?;
    check_dtype::<f32>(&w, "matmul: w")?;
    if let Some(b) = &bias {
        check_dtype::<f32>(b, "matmul: bias")?;
    }
    check_dtype::<f32>(&out, "matmul: out")?;

    let xs = x.shape().to_vec();
    ensure!(
        !xs.is_empty(),
        VALUE_ERROR,
        "matmul: x: expected rank >= 1, got rank 0"
    );
    let k = xs[xs.len() - 1];
    let ws = shape_of(&w, "matmul: w", 2)?;
    let n = ws[1];
    expect_shape(&w, "matmul: w", &[k, n])?;
    if let Some(b) = &bias {
        expect_shape(b, "matmul: bias", &[n])?;
    }
    let mut os = xs.clone();
    let last = os.len() - 1;
    os[last] = n;
    expect_shape(&out, "matmul: out", &os)?;

    let xd = input::<f32>(&x, "matmul: x")?;
    let wd = input::<f32>(&w, "matmul: w")?;
    let bd = match &bias {
        Some(b) => Some(input::<f32>(b, "matmul: bias")?),
        None => None,
    };
    let od = output::<f32>(&out, "matmul: out")?;
    let o = span(od);
    ensure!(!overlaps(o, span(&xd)), VALUE_ERROR, "matmul: out: output memory overlaps input x");
    ensure!(!overlaps(o, span(&wd)), VALUE_ERROR, "matmul: out: output memory overlaps input w");
    if let Some(b) = &bd {
        ensure!(!overlaps(o, span(b)), VALUE_ERROR, "matmul: out: output memory overlaps input bias");
    }
    let rows = xs[..xs.len() - 1].iter().map(|&d| d.max(0) as usize).product();
    matmul_forward(rows, k.max(0) as usize, n.max(0) as usize, &xd, &wd, bd.as_deref(), od)
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
    for (name, got, dims) in [("x", x.len(), [rows, k]), ("w", w.len(), [k, n]), ("out", out.len(), [rows, n])] {
        ensure!(
            len(&dims) == Some(got),
            VALUE_ERROR,
            "matmul: {name}: expected {:?} elements, got {got}",
            dims
        );
    }
    if let Some(b) = bias {
        ensure!(b.len() == n, VALUE_ERROR, "matmul: bias: expected {n} elements, got {}", b.len());
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if let Some(b) = bias {
        for row in out.chunks_exact_mut(n) {
            row.copy_from_slice(b);
        }
    }
    sgemm(
        rows,
        n,
        k,
        x,
        Layout::row_major(0, k),
        w,
        Layout::row_major(0, n),
        out,
        Layout::row_major(0, n),
        bias.is_some(),
        true,
    )
    .map_err(|e| internal("matmul", e))
}
