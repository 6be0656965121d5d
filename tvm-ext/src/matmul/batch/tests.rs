use super::*;
use crate::matmul::testing::data;
use crate::tensor::testing::Owned;
use tvm_ffi::{TensorView, TYPE_ERROR};

fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// A logical tensor of `shape` with values `vals` (row-major), stored either
/// densely or (`permuted`) with its dims in reverse order plus one padding
/// element in front, so that every stride differs from row-major.
fn stored(vals: &[f32], shape: &[usize], permuted: bool) -> Owned<f32> {
    let shape_i: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    if !permuted {
        return Owned::new(vals.to_vec(), &shape_i);
    }
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let rs = row_major(&rev);
    let strides: Vec<usize> = (0..shape.len()).map(|i| rs[shape.len() - 1 - i]).collect();
    let mut buf = vec![f32::NAN; vals.len() + 1];
    let logical = row_major(shape);
    for (flat, v) in vals.iter().enumerate() {
        let off: usize = (0..shape.len())
            .map(|i| (flat / logical[i]) % shape[i] * strides[i])
            .sum();
        buf[1 + off] = *v;
    }
    let st: Vec<i64> = strides.iter().map(|&s| s as i64).collect();
    Owned::strided(buf, &shape_i, &st, 4)
}

/// The value of a row-major tensor of `shape` (with its `strides`, computed once by the caller: this runs
/// in the reference's innermost loop) at the batch index `bi` (right-aligned to `batch`, broadcast) and
/// matrix index `(r, c)`.
fn at(
    vals: &[f32],
    shape: &[usize],
    strides: &[usize],
    batch: &[usize],
    bi: &[usize],
    r: usize,
    c: usize,
) -> f64 {
    let rank = shape.len();
    let skip = batch.len() - (rank - 2);
    let mut off = r * strides[rank - 2] + c * strides[rank - 1];
    for i in 0..rank - 2 {
        if shape[i] > 1 {
            off += bi[i + skip] * strides[i];
        }
    }
    vals[off] as f64
}

/// Runs the packed function on `x` `[.., M, K]` and `y` `[.., K, N]` (stored
/// with their last two dims swapped when transposed) and checks against an
/// f64 reference.
fn check(x_shape: &[usize], y_shape: &[usize], trans_x: bool, trans_y: bool, permuted: bool) {
    let swapped = |s: &[usize], t: bool| {
        let mut s = s.to_vec();
        let r = s.len();
        if t {
            s.swap(r - 2, r - 1);
        }
        s
    };
    let (xs, ys) = (
        &swapped(x_shape, trans_x)[..],
        &swapped(y_shape, trans_y)[..],
    );
    let (xn, yn) = (xs.iter().product::<usize>(), ys.iter().product::<usize>());
    let (xd, yd) = (data(xn, 1), data(yn, 2));
    let (xr, yr) = (xs.len(), ys.len());
    let (m, k) = if trans_x {
        (xs[xr - 1], xs[xr - 2])
    } else {
        (xs[xr - 2], xs[xr - 1])
    };
    let n = if trans_y { ys[yr - 2] } else { ys[yr - 1] };
    let batch = broadcast(&xs[..xr - 2], &ys[..yr - 2]).unwrap();
    let nb: usize = batch.iter().product();
    let mut os: Vec<i64> = batch.iter().map(|&d| d as i64).collect();
    os.extend([m as i64, n as i64]);
    let mut xt = stored(&xd, xs, permuted);
    let mut yt = stored(&yd, ys, permuted);
    let mut ot = Owned::new(vec![f32::NAN; nb * m * n], &os);
    let (fx, fy) = (trans_x as i64, trans_y as i64);
    let views = [xt.view(), yt.view(), ot.view()];
    let mut args = vec![AnyView::from(&fx), AnyView::from(&fy)];
    args.extend(views.iter().map(AnyView::from));
    let what = format!("x {xs:?} y {ys:?} trans {trans_x}/{trans_y} permuted {permuted}");
    function()
        .call_packed(&args)
        .unwrap_or_else(|e| panic!("{what}: {}", e.message()));
    let bstr = row_major(&batch);
    let (xst, yst) = (row_major(xs), row_major(ys));
    for b in 0..nb {
        let bi: Vec<usize> = (0..batch.len()).map(|i| b / bstr[i] % batch[i]).collect();
        for i in 0..m {
            for j in 0..n {
                let (mut acc, mut mag) = (0.0f64, 0.0f64);
                for l in 0..k {
                    let a = if trans_x {
                        at(&xd, xs, &xst, &batch, &bi, l, i)
                    } else {
                        at(&xd, xs, &xst, &batch, &bi, i, l)
                    };
                    let c = if trans_y {
                        at(&yd, ys, &yst, &batch, &bi, j, l)
                    } else {
                        at(&yd, ys, &yst, &batch, &bi, l, j)
                    };
                    acc += a * c;
                    mag += (a * c).abs();
                }
                let got = ot.data[(b * m + i) * n + j] as f64;
                assert!(
                    (got - acc).abs() <= 1e-5 * (1.0 + mag),
                    "{what}: [{b}, {i}, {j}] got {got}, want {acc}"
                );
            }
        }
    }
}

#[test]
fn matches_reference() {
    for permuted in [false, true] {
        for (tx, ty) in [(false, false), (false, true), (true, false), (true, true)] {
            check(&[1, 1, 1], &[1, 1, 1], tx, ty, permuted);
            check(&[12, 17, 64], &[12, 64, 17], tx, ty, permuted);
            check(&[3, 33, 5], &[3, 5, 47], tx, ty, permuted);
            check(&[2, 1, 70, 9], &[1, 3, 9, 19], tx, ty, permuted);
        }
    }
    // ALBERT-like: 12 heads, one row, many rows; y broadcast over a missing dim.
    check(&[12, 1, 64], &[12, 64, 1], false, false, false);
    check(&[24, 130, 64], &[24, 64, 130], false, false, true);
    check(&[24, 130, 130], &[24, 130, 64], false, false, false);
    check(&[4, 2, 5, 6], &[6, 7], false, false, true);
    check(&[5, 6], &[3, 6, 7], false, false, false);
    // Empty results and an empty inner dimension.
    check(&[0, 3, 4], &[1, 4, 5], false, false, false);
    check(&[2, 3, 0], &[2, 0, 5], false, false, false);
}

fn fails(shapes: &[&[i64]], flags: (i64, i64), want: &str) {
    let mut ts: Vec<Owned<f32>> = shapes
        .iter()
        .map(|s| Owned::new(vec![0.25; s.iter().product::<i64>() as usize], s))
        .collect();
    let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
    let mut args = vec![AnyView::from(&flags.0), AnyView::from(&flags.1)];
    args.extend(views.iter().map(AnyView::from));
    match function().call_packed(&args) {
        Ok(_) => panic!("expected failure {want:?}"),
        Err(e) => assert!(
            e.message().contains(want),
            "{:?} lacks {want:?}",
            e.message()
        ),
    }
}

#[test]
fn rejects_bad_arguments() {
    fails(
        &[&[2, 3, 4], &[2, 4, 5]],
        (0, 0),
        "batch_matmul: expected 5 arguments",
    );
    fails(
        &[&[2, 3, 4], &[2, 4, 5], &[2, 3, 5]],
        (2, 0),
        "batch_matmul: trans_x: expected 0 or 1, got 2",
    );
    fails(
        &[&[4], &[4, 5], &[5]],
        (0, 0),
        "batch_matmul: x: expected rank >= 2, got rank 1",
    );
    fails(
        &[&[2, 3, 4], &[2, 5, 5], &[2, 3, 5]],
        (0, 0),
        "batch_matmul: y: the inner dimensions differ",
    );
    fails(
        &[&[2, 3, 4], &[2, 5, 4], &[2, 3, 5]],
        (0, 0),
        "batch_matmul: y: the inner dimensions differ",
    );
    fails(
        &[&[2, 3, 4], &[3, 4, 5], &[2, 3, 5]],
        (0, 0),
        "batch_matmul: the batch dimensions of x [2, 3, 4] and y [3, 4, 5] do not broadcast",
    );
    fails(
        &[&[2, 3, 4], &[2, 4, 5], &[2, 5, 3]],
        (0, 0),
        "batch_matmul: out: expected shape [2, 3, 5], got [2, 5, 3]",
    );
    // trans_y: y is [.., N, K].
    fails(
        &[&[2, 3, 4], &[2, 4, 5], &[2, 3, 5]],
        (0, 1),
        "batch_matmul: y: the inner dimensions differ",
    );

    let zero = 0i64;
    let mut x = Owned::new(vec![1i64; 6], &[1, 2, 3]);
    let mut y = Owned::new(vec![0.5f32; 12], &[1, 3, 4]);
    let mut o = Owned::new(vec![0.0f32; 8], &[1, 2, 4]);
    let views = [x.view(), y.view(), o.view()];
    let mut args = vec![AnyView::from(&zero), AnyView::from(&zero)];
    args.extend(views.iter().map(AnyView::from));
    let err = function().call_packed(&args).err().unwrap();
    assert_eq!(err.kind(), TYPE_ERROR);
    assert!(
        err.message()
            .contains("batch_matmul: x: expected dtype float32, got int64"),
        "{}",
        err.message()
    );
    args[3] = AnyView::from(&zero);
    let err = function().call_packed(&args).err().unwrap();
    assert!(
        err.message().contains("batch_matmul: y: expected a tensor"),
        "{}",
        err.message()
    );

    // A strided output, and an output that is also an input.
    let mut x = Owned::new(vec![0.5f32; 6], &[1, 2, 3]);
    let mut so = Owned::strided(vec![0.0f32; 8], &[1, 2, 4], &[8, 1, 2], 0);
    let views = [x.view(), y.view(), so.view()];
    let mut args = vec![AnyView::from(&zero), AnyView::from(&zero)];
    args.extend(views.iter().map(AnyView::from));
    let err = function().call_packed(&args).err().unwrap();
    assert!(
        err.message()
            .contains("batch_matmul: out: output tensors must be contiguous"),
        "{}",
        err.message()
    );
    let mut sq = Owned::new(vec![0.5f32; 9], &[1, 3, 3]);
    let mut y3 = Owned::new(vec![0.5f32; 9], &[1, 3, 3]);
    let v = sq.view();
    let views = [v, y3.view(), sq.view()];
    let mut args = vec![AnyView::from(&zero), AnyView::from(&zero)];
    args.extend(views.iter().map(AnyView::from));
    let err = function().call_packed(&args).err().unwrap();
    assert!(
        err.message()
            .contains("batch_matmul: out: output memory overlaps input x"),
        "{}",
        err.message()
    );
}

#[test]
fn plain_entry_point_checks_lengths() {
    let x = Operand {
        data: &[1.0; 6],
        offsets: vec![0],
        rs: 3,
        cs: 1,
    };
    let y = Operand {
        data: &[1.0; 6],
        offsets: vec![0, 0],
        rs: 2,
        cs: 1,
    };
    let err = batch_matmul_forward(2, 2, 3, &x, &y, &mut [0.0; 4]).unwrap_err();
    assert!(
        err.message().contains("x has 1 batch items, y has 2"),
        "{}",
        err.message()
    );
    let y = Operand {
        data: &[1.0; 6],
        offsets: vec![0],
        rs: 2,
        cs: 1,
    };
    let err = batch_matmul_forward(2, 2, 3, &x, &y, &mut [0.0; 5]).unwrap_err();
    assert!(
        err.message()
            .contains("out: expected 1 x 2 x 2 elements, got 5"),
        "{}",
        err.message()
    );
    // An operand whose layout runs past its data is an error, not a read out of bounds.
    let short = Operand {
        data: &[1.0; 5],
        offsets: vec![0],
        rs: 2,
        cs: 1,
    };
    let err = batch_matmul_forward(2, 2, 3, &x, &short, &mut [0.0; 4]).unwrap_err();
    assert!(
        err.message().contains("internal error"),
        "{}",
        err.message()
    );
}

/// `cargo test --release -p tvm-ext bench_batch_matmul -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_batch_matmul() {
    for &(nb, m, k, n) in &[
        (12usize, 309usize, 64usize, 309usize),
        (12, 309, 309, 64),
        (12, 510, 64, 510),
    ] {
        let (xd, yd) = (data(nb * m * k, 1), data(nb * k * n, 2));
        let x = Operand {
            data: &xd,
            offsets: (0..nb).map(|b| b * m * k).collect(),
            rs: k,
            cs: 1,
        };
        let y = Operand {
            data: &yd,
            offsets: (0..nb).map(|b| b * k * n).collect(),
            rs: n,
            cs: 1,
        };
        let mut out = vec![0.0f32; nb * m * n];
        let flops = 2.0 * (nb * m * n * k) as f64;
        let reps = ((2e10 / flops) as usize).clamp(3, 200);
        batch_matmul_forward(m, n, k, &x, &y, &mut out).unwrap();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                batch_matmul_forward(m, n, k, &x, &y, &mut out).unwrap();
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "{nb}x[{m}x{k}]@[{k}x{n}]: {:.3} ms, {:.1} GFLOP/s",
            best * 1e3,
            flops / best / 1e9
        );
    }
}

#[test]
fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
    use crate::tensor::fuzz::{check, size, Call, Spec, Value};
    use crate::tensor::testing::Rng;
    let mut rng = Rng(0xb3a7_0001);
    for _ in 0..40 {
        // Batch dims broadcast: each operand has the dim, 1, or (leading) nothing.
        let batch: Vec<usize> = (0..rng.below(3)).map(|_| 1 + rng.below(3)).collect();
        let pick = |rng: &mut Rng| -> Vec<usize> {
            let skip = rng.below(batch.len() + 1);
            batch[skip..]
                .iter()
                .map(|&d| if rng.below(3) == 0 { 1 } else { d })
                .collect()
        };
        let (xb, yb) = (pick(&mut rng), pick(&mut rng));
        let r = xb.len().max(yb.len());
        let full: Vec<usize> = (0..r)
            .map(|i| {
                let at = |v: &[usize]| (i + v.len() >= r).then(|| v[i + v.len() - r]);
                at(&xb).unwrap_or(1).max(at(&yb).unwrap_or(1))
            })
            .collect();
        let (m, n, k) = (size(&mut rng, 6), size(&mut rng, 6), size(&mut rng, 6));
        let (tx, ty) = (rng.below(2) == 1, rng.below(2) == 1);
        let nx: usize = xb.iter().product::<usize>() * m * k;
        let ny: usize = yb.iter().product::<usize>() * k * n;
        let (x, y) = (rng.vec(nx), rng.vec(ny));
        // Element (i, j) of operand `v`'s matrix for batch index `idx` of the output.
        let at = |v: &[f32],
                  dims: &[usize],
                  idx: &[usize],
                  rows: usize,
                  cols: usize,
                  trans: bool,
                  i: usize,
                  j: usize| {
            let mut flat = 0;
            for (d, &extent) in dims.iter().enumerate() {
                let o = idx[idx.len() - dims.len() + d];
                flat = flat * extent + if extent == 1 { 0 } else { o };
            }
            let (r, c) = if trans { (j, i) } else { (i, j) };
            let (_, cs) = if trans { (cols, rows) } else { (rows, cols) };
            v[flat * rows * cols + r * cs + c] as f64
        };
        let nb: usize = full.iter().product();
        let mut want = vec![(0.0, 0.0); nb * m * n];
        for bi in 0..nb {
            let mut idx = vec![0; full.len()];
            let mut rest = bi;
            for d in (0..full.len()).rev() {
                idx[d] = rest % full[d];
                rest /= full[d];
            }
            for i in 0..m {
                for j in 0..n {
                    let (mut v, mut mag) = (0.0, 0.0);
                    for l in 0..k {
                        let p =
                            at(&x, &xb, &idx, m, k, tx, i, l) * at(&y, &yb, &idx, k, n, ty, l, j);
                        v += p;
                        mag += p.abs();
                    }
                    want[(bi * m + i) * n + j] = (v, mag);
                }
            }
        }
        let shape = |b: &[usize], r: usize, c: usize, t: bool| -> Vec<i64> {
            let last = if t { [c, r] } else { [r, c] };
            b.iter().chain(&last).map(|&d| d as i64).collect()
        };
        let call = Call {
            global: "kokoro_tvm_ext.batch_matmul",
            args: vec![
                ("trans_x", Value::Int(tx as i64)),
                ("trans_y", Value::Int(ty as i64)),
                (
                    "x",
                    Value::Tensor(Spec::input(x, &shape(&xb, m, k, tx)).any_rank()),
                ),
                (
                    "y",
                    Value::Tensor(Spec::input(y, &shape(&yb, k, n, ty)).any_rank()),
                ),
                (
                    "out",
                    Value::Tensor(Spec::output(&shape(&full, m, n, false))),
                ),
            ],
            want: vec![("out", want)],
            rel: 1e-5,
            bad: vec![("trans_x", Value::Int(2)), ("trans_y", Value::Int(-1))],
        };
        check(&call, &mut rng);
    }
}
