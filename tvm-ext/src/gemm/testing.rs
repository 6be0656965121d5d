//! The f64 definition of a matrix product, which the tests of the GEMMs and
//! of their callers (the matmuls) compare to, and what the tests of the
//! packed GEMMs share (calling their packers, their benches' shapes and timing).
use super::{sgemm, Layout};
use crate::tensor::testing::{cpu_seconds, Owned, THREAD_CPU};
use crate::tensor::Element;

/// `x [rows, k] @ w [k, n] + bias` in f64: (value, sum of |terms|) per output.
pub fn reference_matmul(
    (rows, k, n): (usize, usize, usize),
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<(f64, f64)> {
    let mut want = vec![(0.0f64, 0.0f64); rows * n];
    for r in 0..rows {
        for j in 0..n {
            let b = bias.map_or(0.0, |b| b[j] as f64);
            let (mut v, mut mag) = (b, b.abs());
            for l in 0..k {
                let p = x[r * k + l] as f64 * w[l * n + j] as f64;
                v += p;
                mag += p.abs();
            }
            want[r * n + j] = (v, mag);
        }
    }
    want
}

// ---------------------------------------------------------------------------
// What the tests of the packed GEMMs (bf16, int8) share.
// ---------------------------------------------------------------------------

/// Calls a registered packer (`pack_bf16`, `pack_int8`) on `w` of `shape`, as
/// the compiler does: the packed tensor, or the error's message.
pub fn call_packer(
    packer: tvm_ffi::Function,
    kind: &str,
    groups: i64,
    w: &[f32],
    shape: &[i64],
) -> Result<tvm_ffi::Tensor, String> {
    use tvm_ffi::AnyView;
    let mut wt = Owned::new(w.to_vec(), shape);
    let kind = tvm_ffi::String::from(kind);
    let view = wt.view();
    let args = [
        AnyView::from(&kind),
        AnyView::from(&groups),
        AnyView::from(&view),
    ];
    match packer.call_packed(&args) {
        Ok(t) => Ok(t.try_into().unwrap()),
        Err(e) => Err(e.message().to_string()),
    }
}

/// [`call_packer`]'s tensor as elements `E`, panicking with the message on an error.
pub fn packed_with<E: Element>(
    packer: tvm_ffi::Function,
    kind: &str,
    groups: i64,
    w: &[f32],
    shape: &[i64],
) -> Owned<E> {
    let t = call_packer(packer, kind, groups, w, shape).unwrap_or_else(|e| panic!("{e}"));
    // SAFETY: the packer made a tensor of `numel` elements `E`.
    let data = unsafe { std::slice::from_raw_parts(t.data_ptr() as *const E, t.numel()) };
    Owned::new(data.to_vec(), t.shape())
}

/// (M = Cout, K = Cin*K, N = tile columns) at Kokoro's conv shapes: where the
/// packed GEMMs' benches compare with the f32 GEMM.
pub const BENCH_SHAPES: [(usize, usize, usize); 6] = [
    (128, 896, 512),
    (256, 2816, 256),
    (512, 1536, 320),
    (512, 3584, 160),
    (64, 128, 1024),
    (128, 384, 1024),
];

/// The rate of `f`, `flops` operations a call, in G per second of this
/// thread's CPU time: best of three runs of about 3 G operations.
pub fn rate_per_core(flops: f64, f: &mut dyn FnMut()) -> f64 {
    let reps = ((3e9 / flops) as usize).max(3);
    f();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = cpu_seconds(THREAD_CPU);
        for _ in 0..reps {
            f();
        }
        best = best.min((cpu_seconds(THREAD_CPU) - t) / reps as f64);
    }
    flops / best / 1e9
}

/// The f32 GEMM's [`rate_per_core`] on `m x k` by `k x n`, on one thread.
pub fn f32_gemm_rate(m: usize, k: usize, n: usize) -> f64 {
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; k * n];
    let mut c = vec![0.0f32; m * n];
    rate_per_core(2.0 * (m * n * k) as f64, &mut || {
        sgemm(
            m,
            n,
            k,
            &a,
            Layout::row_major(0, k),
            &b,
            Layout::row_major(0, n),
            &mut c,
            Layout::row_major(0, n),
            false,
            false,
        )
        .unwrap()
    })
}
