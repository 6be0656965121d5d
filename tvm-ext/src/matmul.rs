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
use std::borrow::Cow;

use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, TensorView, VALUE_ERROR};

use rayon::prelude::*;

use crate::args::{no_overlap, span, Cursor};
use crate::gemm::{sgemm_shared, threads, Layout, SharedMut};
use crate::interface::{self, Interface};
use crate::job::{internal, JobError};
use crate::tensor::{byte_span, check_dtype, dim, expect_shape, input, output, shape_of, Bf16};

/// The registered function.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        matmul_packed(args)?;
        Ok(Any::default())
    })
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

/// Parses and validates the packed arguments of `matmul`, or with `packed` of
/// `matmul_bf16`, whose `w` is packed bf16 (the caller checks its shape) and
/// whose `n` comes from `out`.
pub(crate) fn parse_call(
    iface: &'static Interface,
    args: &[AnyView],
    packed: bool,
) -> Result<MatmulCall> {
    let who = iface.name;
    let mut c = Cursor::new(iface, args)?;
    c.flag("has_bias")?;
    let x = c.tensor("x")?;
    let w = c.tensor("w")?;
    let bias = c.optional_tensor("bias")?;
    let out = c.output("out")?;
    c.finish()?;
    check_dtype::<f32>(&x, &format!("{who}: x"))?;
    if packed {
        check_dtype::<Bf16>(&w, &format!("{who}: w"))?;
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

/// Parses and validates the packed arguments, then runs [`matmul_forward`].
pub fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul";
    let c = parse_call(&interface::MATMUL, args, false)?;
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
mod tests {
    use super::*;
    use crate::tensor::testing::Owned;
    use tvm_ffi::{TensorView, TYPE_ERROR};

    fn data(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919 + seed * 104729) % 2001) as f32 / 1000.0) - 1.0)
            .collect()
    }

    fn args_of<'a>(flag: &'a i64, views: &'a [TensorView]) -> Vec<AnyView<'a>> {
        let mut args = vec![AnyView::from(flag)];
        args.extend(views.iter().map(AnyView::from));
        args
    }

    /// Runs the packed function on `x` (shape `xs`, optionally stored transposed
    /// in its last two dims) and checks against an f64 reference.
    fn check(xs: &[i64], n: usize, has_bias: bool, transposed_x: bool) {
        let k = *xs.last().unwrap() as usize;
        let rows: usize = xs[..xs.len() - 1].iter().map(|&d| d as usize).product();
        let x = data(rows * k, 1);
        let w = data(k * n, 2);
        let b = data(n, 3);
        let mut xt = if transposed_x {
            // Rank 2 only: store x^T and view it with swapped strides.
            let r = rows;
            let mut st = vec![0.0f32; r * k];
            for i in 0..r {
                for j in 0..k {
                    st[j * r + i] = x[i * k + j];
                }
            }
            Owned::strided(st, xs, &[1, r as i64], 0)
        } else {
            Owned::new(x.clone(), xs)
        };
        let mut wt = Owned::new(w.clone(), &[k as i64, n as i64]);
        let mut bt = Owned::new(b.clone(), &[n as i64]);
        let mut os = xs.to_vec();
        *os.last_mut().unwrap() = n as i64;
        let mut ot = Owned::new(vec![f32::NAN; rows * n], &os);
        let mut views = vec![xt.view(), wt.view()];
        if has_bias {
            views.push(bt.view());
        }
        views.push(ot.view());
        let flag = has_bias as i64;
        function()
            .call_packed(&args_of(&flag, &views))
            .unwrap_or_else(|e| panic!("{xs:?} n={n}: {}", e.message()));
        drop(views);
        for i in 0..rows {
            for j in 0..n {
                let mut acc = if has_bias { b[j] as f64 } else { 0.0 };
                let mut mag = acc.abs();
                for l in 0..k {
                    let t = x[i * k + l] as f64 * w[l * n + j] as f64;
                    acc += t;
                    mag += t.abs();
                }
                let got = ot.data[i * n + j] as f64;
                assert!(
                    (got - acc).abs() <= 1e-4 * (1.0 + mag),
                    "{xs:?} n={n} bias={has_bias}: [{i}, {j}] got {got}, want {acc}"
                );
            }
        }
    }

    #[test]
    fn matches_reference() {
        check(&[1, 1], 1, false, false);
        check(&[1, 1], 1, true, false);
        check(&[3, 5, 7], 9, true, false);
        check(&[2, 3, 17], 33, false, false);
        check(&[1, 64], 130, true, false);
        check(&[70, 300], 20, true, false);
        check(&[130, 96], 47, false, false);
        check(&[19], 5, true, false);
        check(&[0, 4], 3, true, false);
        check(&[2, 0], 3, true, false);
        check(&[23, 31], 17, true, true);
    }

    fn err_of(r: Result<Any>) -> tvm_ffi::Error {
        match r {
            Ok(_) => panic!("the call should fail"),
            Err(e) => e,
        }
    }

    fn fails(shapes: &[&[i64]], has_bias: i64, kind: tvm_ffi::ErrorKind, want: &str) {
        let mut ts: Vec<Owned<f32>> = shapes
            .iter()
            .map(|s| Owned::new(vec![0.25; s.iter().product::<i64>() as usize], s))
            .collect();
        let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
        match function().call_packed(&args_of(&has_bias, &views)) {
            Ok(_) => panic!("expected failure {want:?}"),
            Err(e) => {
                assert_eq!(e.kind(), kind, "{}", e.message());
                assert!(
                    e.message().contains(want),
                    "{:?} lacks {want:?}",
                    e.message()
                );
            }
        }
    }

    #[test]
    fn rejects_bad_arguments() {
        fails(
            &[&[2, 3], &[3, 4], &[2, 4]],
            2,
            VALUE_ERROR,
            "matmul: has_bias: expected 0 or 1, got 2",
        );
        fails(
            &[&[2, 3], &[3, 4], &[2, 4]],
            1,
            VALUE_ERROR,
            "matmul: expected 5 arguments for has_bias=1, got 4",
        );
        fails(
            &[&[2, 3], &[3, 4], &[4], &[2, 4]],
            0,
            VALUE_ERROR,
            "matmul: expected 4 arguments for has_bias=0, got 5",
        );
        fails(
            &[&[2, 3], &[3, 4, 1], &[2, 4]],
            0,
            VALUE_ERROR,
            "matmul: w: expected rank 2, got rank 3",
        );
        fails(
            &[&[2, 3], &[5, 4], &[2, 4]],
            0,
            VALUE_ERROR,
            "matmul: w: expected shape [3, 4], got [5, 4]",
        );
        fails(
            &[&[2, 3], &[3, 4], &[3], &[2, 4]],
            1,
            VALUE_ERROR,
            "matmul: bias: expected shape [4], got [3]",
        );
        fails(
            &[&[2, 3], &[3, 4], &[2, 5]],
            0,
            VALUE_ERROR,
            "matmul: out: expected shape [2, 4], got [2, 5]",
        );
        fails(
            &[&[2, 2, 3], &[3, 4], &[4, 4]],
            0,
            VALUE_ERROR,
            "matmul: out: expected rank 3, got rank 2 with shape [4, 4]",
        );
        fails(
            &[&[], &[3, 4], &[4]],
            0,
            VALUE_ERROR,
            "matmul: x: expected rank >= 1, got rank 0",
        );
        let r = function().call_packed(&[]);
        assert!(err_of(r)
            .message()
            .contains("matmul: expected at least 1 argument"));

        // dtype, non-tensor, strided and aliasing outputs.
        let mut x = Owned::new(vec![1i64; 6], &[2, 3]);
        let mut w = Owned::new(vec![0.5f32; 12], &[3, 4]);
        let mut o = Owned::new(vec![0.0f32; 8], &[2, 4]);
        let views = [x.view(), w.view(), o.view()];
        let zero = 0i64;
        let err = err_of(function().call_packed(&args_of(&zero, &views)));
        assert_eq!(err.kind(), TYPE_ERROR);
        assert!(
            err.message()
                .contains("matmul: x: expected dtype float32, got int64"),
            "{}",
            err.message()
        );
        let mut args = args_of(&zero, &views);
        args[2] = AnyView::from(&zero);
        let err = err_of(function().call_packed(&args));
        assert!(
            err.message().contains("matmul: w: expected a tensor"),
            "{}",
            err.message()
        );
        let mut x = Owned::new(vec![0.5f32; 6], &[2, 3]);
        let mut so = Owned::strided(vec![0.0f32; 8], &[2, 4], &[1, 2], 0);
        let views = [x.view(), w.view(), so.view()];
        let err = err_of(function().call_packed(&args_of(&zero, &views)));
        assert!(
            err.message()
                .contains("matmul: out: output tensors must be contiguous"),
            "{}",
            err.message()
        );
        let mut sq = Owned::new(vec![0.5f32; 9], &[3, 3]);
        let mut w3 = Owned::new(vec![0.5f32; 9], &[3, 3]);
        let v = sq.view();
        let views = [v, w3.view(), sq.view()];
        let err = err_of(function().call_packed(&args_of(&zero, &views)));
        assert!(
            err.message()
                .contains("matmul: out: output memory overlaps input x"),
            "{}",
            err.message()
        );
    }

    /// `cargo test --release -p tvm-ext bench_matmul -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_matmul() {
        for &(r, k, n) in &[
            (510usize, 768usize, 3072usize),
            (510, 3072, 768),
            (510, 768, 768),
            (510, 128, 768),
            (64, 512, 512),
        ] {
            let (x, w, b) = (data(r * k, 1), data(k * n, 2), data(n, 3));
            let mut out = vec![0.0f32; r * n];
            let flops = 2.0 * (r * k * n) as f64;
            let reps = ((1e10 / flops) as usize).clamp(3, 500);
            matmul_forward(r, k, n, &x, &w, Some(&b), &mut out).unwrap();
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    matmul_forward(r, k, n, &x, &w, Some(&b), &mut out).unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            println!(
                "matmul {r}x{k}x{n}: {:.3} ms {:.1} GFLOP/s",
                best * 1e3,
                flops / best / 1e9
            );
        }
    }

    #[test]
    fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
        use crate::tensor::fuzz::{check, reference_matmul, size, Call, Spec, Value};
        use crate::tensor::testing::Rng;
        let mut rng = Rng(0x3a7_0001);
        for _ in 0..40 {
            let lead: Vec<usize> = (0..rng.below(3)).map(|_| size(&mut rng, 3)).collect();
            let (k, n) = (size(&mut rng, 9), size(&mut rng, 9));
            let rows: usize = lead.iter().product();
            let has_bias = rng.below(2) == 1;
            let (x, w, bias) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
            let want = reference_matmul((rows, k, n), &x, &w, has_bias.then_some(&bias[..]));
            let shape = |last: usize| -> Vec<i64> {
                lead.iter().chain([&last]).map(|&d| d as i64).collect()
            };
            let mut args = vec![
                ("has_bias", Value::Int(has_bias as i64)),
                ("x", Value::Tensor(Spec::input(x, &shape(k)).any_rank())),
                ("w", Value::Tensor(Spec::input(w, &[k as i64, n as i64]))),
            ];
            if has_bias {
                args.push(("bias", Value::Tensor(Spec::derived(bias, &[n as i64]))));
            }
            args.push(("out", Value::Tensor(Spec::output(&shape(n)))));
            let call = Call {
                global: "kokoro_tvm_ext.matmul",
                args,
                want: vec![("out", want)],
                rel: 1e-5,
                bad: vec![("has_bias", Value::Int(2))],
            };
            check(&call, &mut rng);
        }
    }
}
