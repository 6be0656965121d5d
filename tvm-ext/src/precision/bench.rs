//! Every precision's convolutions and matmul at Kokoro's sizes, timed through
//! the registry (as compiled code calls them):
//! `cargo test --release -p tvm-ext bench_precisions -- --ignored --nocapture`
use tvm_ffi::{AnyView, Function};

use crate::gemm::testing::call_packer;
use crate::tensor::testing::{Owned, Rng};

/// (transpose, cin, cout, L, k, stride, pad, dilation, groups, output_padding, bias)
pub(crate) type Shape = (
    bool,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    bool,
);

fn global(name: &str) -> Function {
    crate::register_all().unwrap();
    Function::get_global(&format!("kokoro_tvm_ext.{name}")).unwrap()
}

/// Calls conv `precision` ("" for f32) `reps` times: its output and the times.
pub(crate) fn conv(precision: &str, s: Shape, reps: usize) -> (Vec<f32>, Vec<f64>) {
    let (tr, cin, cout, l, k, st, p, d, g, op, has_bias) = s;
    let mut rng = Rng((cin * 131 + l * 7 + k + st) as u64);
    let x = rng.vec(cin * l);
    let w_shape = if tr {
        [cin, cout / g, k]
    } else {
        [cout, cin / g, k]
    };
    let w = rng.vec(w_shape.iter().product());
    let b = rng.vec(cout);
    let lout = if tr {
        (l - 1) * st - 2 * p + d * (k - 1) + op + 1
    } else {
        (l + 2 * p - d * (k - 1) - 1) / st + 1
    };
    let kind = if tr { "conv1d_transpose" } else { "conv1d" };
    let shape = w_shape.map(|v| v as i64);
    let packed = match precision {
        "" => None,
        pr => Some(call_packer(global(&format!("pack_{pr}")), kind, g as i64, &w, &shape).unwrap()),
    };
    let mut wt = Owned::new(w.clone(), &shape);
    let mut xt = Owned::new(x, &[1, cin as i64, l as i64]);
    let mut bt = Owned::new(b, &[cout as i64]);
    let mut ot = Owned::new(vec![f32::NAN; cout * lout], &[1, cout as i64, lout as i64]);
    let mut ints = vec![st as i64, p as i64, p as i64];
    if tr {
        ints.push(op as i64);
    }
    ints.extend([d as i64, g as i64, has_bias as i64]);
    if packed.is_some() {
        ints.push(k as i64);
    }
    let name = match precision {
        "" => kind.to_string(),
        pr => format!("{kind}_{pr}"),
    };
    let f = global(&name);
    let mut times = vec![];
    let (xv, wv, bv, ov) = (xt.view(), wt.view(), bt.view(), ot.view());
    let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
    args.push(AnyView::from(&xv));
    match &packed {
        Some(t) => args.push(AnyView::from(t)),
        None => args.push(AnyView::from(&wv)),
    }
    if has_bias {
        args.push(AnyView::from(&bv));
    }
    args.push(AnyView::from(&ov));
    for _ in 0..reps {
        let t = std::time::Instant::now();
        f.call_packed(&args).unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    drop(args);
    (ot.data.clone(), times)
}

pub(crate) fn matmul(
    precision: &str,
    (rows, k, n): (usize, usize, usize),
    reps: usize,
) -> (Vec<f32>, Vec<f64>) {
    let mut rng = Rng((rows * 31 + k * 7 + n) as u64);
    let x = rng.vec(rows * k);
    let w = rng.vec(k * n);
    let b = rng.vec(n);
    let shape = [k as i64, n as i64];
    let packed = match precision {
        "" => None,
        pr => Some(call_packer(global(&format!("pack_{pr}")), "matmul", 1, &w, &shape).unwrap()),
    };
    let mut wt = Owned::new(w, &shape);
    let mut xt = Owned::new(x, &[rows as i64, k as i64]);
    let mut bt = Owned::new(b, &[n as i64]);
    let mut ot = Owned::new(vec![f32::NAN; rows * n], &[rows as i64, n as i64]);
    let name = match precision {
        "" => "matmul".to_string(),
        pr => format!("matmul_{pr}"),
    };
    let f = global(&name);
    let flag = 1i64;
    let (xv, wv, bv, ov) = (xt.view(), wt.view(), bt.view(), ot.view());
    let mut args = vec![AnyView::from(&flag), AnyView::from(&xv)];
    match &packed {
        Some(t) => args.push(AnyView::from(t)),
        None => args.push(AnyView::from(&wv)),
    }
    args.push(AnyView::from(&bv));
    args.push(AnyView::from(&ov));
    let mut times = vec![];
    for _ in 0..reps {
        let t = std::time::Instant::now();
        f.call_packed(&args).unwrap();
        times.push(t.elapsed().as_secs_f64());
    }
    drop(args);
    (ot.data.clone(), times)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2] * 1e3
}

/// Median milliseconds of 20 calls per precision (after 3 warm-up calls), on
/// the global rayon pool.
#[test]
#[ignore]
fn bench_precisions() {
    let convs: &[(&str, Shape)] = &[
        (
            "conv1d 512->512 k3 L400",
            (false, 512, 512, 400, 3, 1, 1, 1, 1, 0, true),
        ),
        (
            "conv1d_transpose 256->128 k20 s10 L320",
            (true, 256, 128, 320, 20, 10, 5, 1, 1, 0, true),
        ),
    ];
    println!("threads {}", rayon::current_num_threads());
    for (name, s) in convs {
        for pr in ["", "bf16", "int8"] {
            conv(pr, *s, 3);
            let (_, t) = conv(pr, *s, 20);
            println!("SPEED {name} {pr:>5} {:.3} ms", median(t));
        }
    }
    for pr in ["", "bf16", "int8"] {
        matmul(pr, (400, 512, 2048), 3);
        let (_, t) = matmul(pr, (400, 512, 2048), 20);
        println!("SPEED matmul 400x512x2048 {pr:>5} {:.3} ms", median(t));
    }
}
