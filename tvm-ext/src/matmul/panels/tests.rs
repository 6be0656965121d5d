use tvm_ffi::AnyView;

use super::*;
use crate::gemm::panels::pack;
use crate::gemm::testing::reference_matmul;
use crate::tensor::testing::{assert_close_to, Owned, Rng};

/// Calls the registered kernel on `x [rows, k]` and weights packed from `w [k, n]`.
fn call(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    packed: Owned<f32>,
    bias: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let mut wt = packed;
    let mut xt = Owned::new(x.to_vec(), &[rows as i64, k as i64]);
    let mut bt = Owned::new(
        bias.unwrap_or(&[]).to_vec(),
        &[bias.map_or(0, |b| b.len()) as i64],
    );
    let mut ot = Owned::new(vec![f32::NAN; rows * n], &[rows as i64, n as i64]);
    let flag = bias.is_some() as i64;
    let mut views = vec![xt.view(), wt.view()];
    if bias.is_some() {
        views.push(bt.view());
    }
    views.push(ot.view());
    let mut args = vec![AnyView::from(&flag)];
    args.extend(views.iter().map(AnyView::from));
    matmul_function().call_packed(&args)?;
    drop(args);
    drop(views);
    Ok(ot.data)
}

fn packed(k: usize, n: usize, w: &[f32]) -> Owned<f32> {
    Owned::new(pack(k, n, w), &crate::gemm::panels::packed_shape(k, n))
}

/// Through the registry, against the f64 definition.
#[test]
fn matmul_panels_matches_the_f64_product() {
    for &(rows, k, n, has_bias) in &[
        (1usize, 1usize, 1usize, true),
        (50, 200, 70, true),
        (7, 33, 64, false),
    ] {
        let mut rng = Rng((rows + k * 3 + n * 5) as u64);
        let (x, w, b) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
        let bias = has_bias.then_some(&b[..]);
        let got = call(rows, k, n, &x, packed(k, n, &w), bias)
            .unwrap_or_else(|e| panic!("{}", e.message()));
        assert_close_to(
            &format!("{rows}x{k}x{n}"),
            &got,
            &reference_matmul((rows, k, n), &x, &w, bias),
            1e-6,
        );
    }
}

#[test]
fn matmul_panels_rejects_weights_packed_for_another_shape_and_names_the_packer() {
    let (rows, k, n) = (2usize, 3usize, 70usize);
    let wrong = packed(k, 4, &[0.5; 12]);
    let Err(e) = call(rows, k, n, &[0.5; 6], wrong, None) else {
        panic!("the call should fail");
    };
    let m = e.message().to_string();
    assert!(
        m.contains("matmul_panels: w: expected shape [2, 3, 64], got [1, 3, 64]")
            && m.contains("pack_f32"),
        "{m}"
    );
}
