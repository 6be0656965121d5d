//! What the tests share: `TensorView`s over Rust-owned memory, as TVM would
//! hand them over, test data, tolerances, and the benches' CPU clocks.
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDevice, DLTensor};
use tvm_ffi::TensorView;

use super::Element;

/// A tiny deterministic generator (64-bit LCG) of test data in [-1, 1).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }

    /// Uniform in `0..n`, `n >= 1`.
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next() + 1.0) * 0.5 * n as f32) as usize).min(n - 1)
    }
}

/// Each output within `rel * (1 + sum of |terms|)` of the reference.
pub fn assert_close_to(what: &str, got: &[f32], want: &[(f64, f64)], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, (v, mag))) in got.iter().zip(want).enumerate() {
        let tol = rel * (1.0 + mag);
        assert!(
            (*g as f64 - v).abs() <= tol,
            "{what}: element {i}: got {g}, want {v} (tol {tol})"
        );
    }
}

/// Owns the data, shape and strides behind a `DLTensor`.
pub struct Owned<E: Element> {
    pub data: Vec<E>,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub byte_offset: u64,
    dl: Box<DLTensor>,
}

impl<E: Element> Owned<E> {
    pub fn new(data: Vec<E>, shape: &[i64]) -> Self {
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        Self::strided(data, shape, &strides, 0)
    }

    pub fn strided(data: Vec<E>, shape: &[i64], strides: &[i64], byte_offset: u64) -> Self {
        let dl = Box::new(DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice::new(tvm_ffi::tvm_ffi_sys::dlpack::DLDeviceType::kDLCPU, 0),
            ndim: shape.len() as i32,
            dtype: E::DL_DATA_TYPE,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset,
        });
        Self {
            data,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            byte_offset,
            dl,
        }
    }

    pub fn view(&mut self) -> TensorView {
        self.dl.data = self.data.as_mut_ptr() as *mut core::ffi::c_void;
        self.dl.shape = self.shape.as_mut_ptr();
        self.dl.strides = self.strides.as_mut_ptr();
        self.dl.byte_offset = self.byte_offset;
        unsafe { TensorView::from_raw(&*self.dl) }
    }
}

/// `clock_gettime`'s clock of the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`).
pub const PROCESS_CPU: i32 = 2;
/// `clock_gettime`'s clock of the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
pub const THREAD_CPU: i32 = 3;

/// Seconds of CPU time on `clock` ([`PROCESS_CPU`] or [`THREAD_CPU`]): what a
/// busy, shared machine does not inflate, unlike wall time (for the benches).
pub fn cpu_seconds(clock: i32) -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a plain syscall wrapper writing the struct we pass.
    unsafe { clock_gettime(clock, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}
