use super::*;
use crate::gemm::int8::testing::{assert_within, max_abs, pack};
use crate::gemm::testing::reference_matmul;
use crate::tensor::testing::{Owned, Rng};
use tvm_ffi::AnyView;

/// The registered kernel against the f64 definition within the quantization
/// bound: per term `|w| dx_r + |x| dw + dx_r dw`, `dx_r = max|x[r]| / 255` (each
/// row its own range), `dw = max|w| / 254`. Without VNNI it is the f32 matmul
/// on the dequantized weights, inside the same bound.
#[test]
fn matmul_int8_matches_f32_within_the_quantization_bound() {
    for &(rows, k, n, has_bias) in &[
        (1usize, 1usize, 1usize, false),
        (1, 128, 1090, true),
        (3, 5, 7, true),
        (33, 17, 65, false),
        (70, 301, 20, true),
        (0, 4, 3, true),
    ] {
        let mut rng = Rng((rows * 31 + k * 7 + n) as u64);
        // Rows of different magnitudes: the per-row scales matter.
        let x: Vec<f32> = (0..rows * k)
            .map(|i| rng.next() * (1 + i / k % 5) as f32)
            .collect();
        let (w, b) = (rng.vec(k * n), rng.vec(n));
        let bias = has_bias.then_some(&b[..]);
        let want = reference_matmul((rows, k, n), &x, &w, bias);
        let dw = max_abs(&w) as f64 / 254.0;
        let sum_w: Vec<f64> = (0..n)
            .map(|j| (0..k).map(|l| w[l * n + j].abs() as f64).sum())
            .collect();
        let bound: Vec<f64> = (0..rows * n)
            .map(|i| {
                let (r, j) = (i / n, i % n);
                let xr = &x[r * k..][..k];
                let dx = max_abs(xr) as f64 / 255.0;
                let sum_x: f64 = xr.iter().map(|v| v.abs() as f64).sum();
                sum_w[j] * dx + sum_x * dw + k as f64 * dx * dw
            })
            .collect();
        let mut wp = pack("matmul", 1, &w, &[k as i64, n as i64]);
        let mut xt = Owned::new(x.clone(), &[rows as i64, k as i64]);
        let mut bt = Owned::new(b.clone(), &[n as i64]);
        let mut ot = Owned::new(vec![f32::NAN; rows * n], &[rows as i64, n as i64]);
        let flag = has_bias as i64;
        let mut views = vec![xt.view(), wp.view()];
        if has_bias {
            views.push(bt.view());
        }
        views.push(ot.view());
        let mut args = vec![AnyView::from(&flag)];
        args.extend(views.iter().map(AnyView::from));
        matmul_function()
            .call_packed(&args)
            .unwrap_or_else(|e| panic!("{}", e.message()));
        drop(args);
        drop(views);
        assert_within(&format!("{rows}x{k}x{n}"), &ot.data, &want, &bound);
    }
}

#[test]
fn matmul_int8_rejects_weights_packed_for_another_n() {
    let mut wm = pack("matmul", 1, &[0.5; 12], &[3, 4]);
    let mut xm = Owned::new(vec![0.5f32; 6], &[2, 3]);
    let mut om = Owned::new(vec![0.0f32; 80], &[2, 40]);
    let zero = 0i64;
    let views = [xm.view(), wm.view(), om.view()];
    let mut args = vec![AnyView::from(&zero)];
    args.extend(views.iter().map(AnyView::from));
    let m = match matmul_function().call_packed(&args) {
        Ok(_) => panic!("the call should fail"),
        Err(e) => e.message().to_string(),
    };
    assert!(
        m.contains("matmul_int8: w: expected shape [1, 144, 4], got [1, 40, 4]")
            && m.contains("pack_int8"),
        "{m}"
    );
}
