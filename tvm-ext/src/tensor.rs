//! The only place that knows about dtype, device, shape and stride checks.
//!
//! Kernels receive `TensorView`s straight from TVM (zero-copy). Inputs may be
//! strided or offset; [`input`] returns them as a contiguous row-major slice,
//! borrowing when the layout already is contiguous and copying otherwise.
//! Outputs come from TVM's allocator and must be contiguous; [`output`] checks it.
use std::borrow::Cow;

use tvm_ffi::dtype::AsDLDataType;
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataType, DLDataTypeCode, DLDeviceType};
use tvm_ffi::DLDataTypeExt;
use tvm_ffi::{bail, ensure, Result, TensorView, TYPE_ERROR, VALUE_ERROR};

/// Element types the kernels accept; tvm-ffi's [`AsDLDataType`] ties each to its dtype.
pub trait Element: AsDLDataType + Default + Send + Sync + 'static {}

impl Element for f32 {}

impl Element for i64 {}

/// A bfloat16 value as its bits; the kernels convert, never compute with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl AsDLDataType for Bf16 {
    const DL_DATA_TYPE: DLDataType = DLDataType {
        code: DLDataTypeCode::kDLBfloat as u8,
        bits: 16,
        lanes: 1,
    };
}

impl Element for Bf16 {}

/// Checks that `t` is a host tensor of element type `E`.
pub fn check_dtype<E: Element>(t: &TensorView, name: &str) -> Result<()> {
    let dev = t.device();
    ensure!(
        dev.device_type == DLDeviceType::kDLCPU,
        VALUE_ERROR,
        "{name}: expected a CPU tensor, got device type {:?}",
        dev.device_type
    );
    let d = t.dtype();
    ensure!(
        d == E::DL_DATA_TYPE,
        TYPE_ERROR,
        "{name}: expected dtype {}, got {}",
        E::DL_DATA_TYPE.to_string().as_str(),
        d.to_string().as_str()
    );
    Ok(())
}

/// Checks the rank of `t` and returns its shape.
pub fn shape_of<'a>(t: &'a TensorView, name: &str, rank: usize) -> Result<&'a [i64]> {
    let shape = t.shape();
    ensure!(
        shape.len() == rank,
        VALUE_ERROR,
        "{name}: expected rank {rank}, got rank {} with shape {:?}",
        shape.len(),
        shape
    );
    Ok(shape)
}

/// Checks that `t` has exactly `expected` as its shape.
pub fn expect_shape(t: &TensorView, name: &str, expected: &[i64]) -> Result<()> {
    let shape = shape_of(t, name, expected.len())?;
    ensure!(
        shape == expected,
        VALUE_ERROR,
        "{name}: expected shape {:?}, got {:?}",
        expected,
        shape
    );
    Ok(())
}

/// A tensor dimension as a size; dimensions are never negative.
pub fn dim(v: i64) -> usize {
    v.max(0) as usize
}

/// The element count of shape `dims`, an error naming `name` on overflow.
pub fn checked_len(name: &str, dims: &[usize]) -> Result<usize> {
    match dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        Some(n) => Ok(n),
        None => bail!(VALUE_ERROR, "{name}: size {:?} overflows", dims),
    }
}

/// Checks that the dense buffer `name` of `len` elements holds shape `dims`.
pub fn expect_len(name: &str, len: usize, dims: &[usize]) -> Result<()> {
    let want = checked_len(name, dims)?;
    ensure!(
        len == want,
        VALUE_ERROR,
        "{name}: expected {want} elements (shape {:?}), got {len}",
        dims
    );
    Ok(())
}

/// The address of `t`'s first element, which must be aligned to its element
/// type: slices (and the kernels' loads) require it.
fn base_ptr<E: Element>(t: &TensorView, name: &str) -> Result<*mut E> {
    let raw = unsafe { &*t.as_raw() };
    let offset = raw.byte_offset as usize;
    if t.numel() > 0 && t.data_ptr().is_null() {
        bail!(
            VALUE_ERROR,
            "{name}: tensor has elements but a null data pointer"
        );
    }
    let align = std::mem::align_of::<E>();
    let address = (t.data_ptr() as usize).wrapping_add(offset);
    ensure!(
        address.is_multiple_of(align),
        VALUE_ERROR,
        "{name}: data pointer {:p} + byte_offset {offset} is not aligned to its {align}-byte elements",
        t.data_ptr()
    );
    Ok(address as *mut E)
}

/// The bytes `t`'s elements occupy (from the lowest to one past the highest
/// addressed element), `None` when it has none. For overlap checks.
pub fn byte_span(t: &TensorView) -> Option<(usize, usize)> {
    if t.numel() == 0 || t.data_ptr().is_null() {
        return None;
    }
    let raw = unsafe { &*t.as_raw() };
    let item = (t.dtype().bits as usize).div_ceil(8) * t.dtype().lanes.max(1) as usize;
    let (mut lo, mut hi) = (0i64, 0i64);
    for (&n, &s) in t.shape().iter().zip(&strides_of(t)) {
        let reach = (n - 1) * s;
        lo += reach.min(0);
        hi += reach.max(0);
    }
    let base = t.data_ptr() as usize + raw.byte_offset as usize;
    let start = base as i64 + lo * item as i64;
    let end = base as i64 + (hi + 1) * item as i64;
    Some((start.max(0) as usize, end.max(0) as usize))
}

/// Strides in elements, treating null strides as row-major.
fn strides_of(t: &TensorView) -> Vec<i64> {
    let raw = unsafe { &*t.as_raw() };
    if t.ndim() == 0 || !raw.strides.is_null() {
        return t.strides().to_vec();
    }
    let mut strides = vec![1i64; t.ndim()];
    for i in (0..t.ndim().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * t.shape()[i + 1];
    }
    strides
}

/// An input as a row-major slice: borrowed when contiguous, else gathered.
///
/// The caller must not keep the slice beyond the packed call that received `t`.
pub fn input<'a, E: Element>(t: &TensorView, name: &str) -> Result<Cow<'a, [E]>> {
    check_dtype::<E>(t, name)?;
    let n = t.numel();
    if n == 0 {
        return Ok(Cow::Owned(Vec::new()));
    }
    let base = base_ptr::<E>(t, name)?;
    if t.is_contiguous() {
        return Ok(Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(base, n)
        }));
    }
    let shape = t.shape().to_vec();
    let strides = strides_of(t);
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0i64; shape.len()];
    for _ in 0..n {
        let off: i64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(unsafe { *base.offset(off as isize) });
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok(Cow::Owned(out))
}

/// A destination tensor as a mutable row-major slice. It must be contiguous.
///
/// The caller must not keep the slice beyond the packed call that received `t`,
/// and must not pass the same tensor twice.
pub fn output<'a, E: Element>(t: &TensorView, name: &str) -> Result<&'a mut [E]> {
    check_dtype::<E>(t, name)?;
    ensure!(
        t.is_contiguous(),
        VALUE_ERROR,
        "{name}: output tensors must be contiguous, got strides {:?} for shape {:?}",
        strides_of(t),
        t.shape()
    );
    let n = t.numel();
    if n == 0 {
        return Ok(&mut []);
    }
    let base = base_ptr::<E>(t, name)?;
    Ok(unsafe { std::slice::from_raw_parts_mut(base, n) })
}

/// An input read in place through its own strides, for kernels (GEMM) that take
/// strided operands and so need no gathered copy.
pub struct Strided<'a, E> {
    /// The smallest slice holding every element of the tensor.
    pub data: &'a [E],
    pub shape: Vec<usize>,
    /// Element strides into `data`; 0 for dimensions of size 1.
    pub strides: Vec<usize>,
}

/// `t` as a [`Strided`] view. Negative strides (never produced by TVM) are refused.
///
/// The caller must not keep the view beyond the packed call that received `t`.
pub fn strided_input<'a, E: Element>(t: &TensorView, name: &str) -> Result<Strided<'a, E>> {
    check_dtype::<E>(t, name)?;
    let shape: Vec<usize> = t.shape().iter().map(|&d| dim(d)).collect();
    let raw_strides = strides_of(t);
    let mut strides = Vec::with_capacity(shape.len());
    // Index of the last element, the slice length minus one.
    let mut last = 0usize;
    for (&d, &s) in shape.iter().zip(&raw_strides) {
        if d <= 1 {
            strides.push(0);
            continue;
        }
        ensure!(
            s >= 0,
            VALUE_ERROR,
            "{name}: negative strides are not supported, got strides {:?} for shape {:?}",
            raw_strides,
            t.shape()
        );
        let s = s as usize;
        last = match (d - 1).checked_mul(s).and_then(|v| v.checked_add(last)) {
            Some(v) => v,
            None => bail!(VALUE_ERROR, "{name}: strides {:?} overflow", raw_strides),
        };
        strides.push(s);
    }
    if shape.contains(&0) {
        return Ok(Strided {
            data: &[],
            shape,
            strides,
        });
    }
    let base = base_ptr::<E>(t, name)?;
    let data = unsafe { std::slice::from_raw_parts(base as *const E, last + 1) };
    Ok(Strided {
        data,
        shape,
        strides,
    })
}

#[cfg(test)]
pub(crate) mod fuzz;

#[cfg(test)]
pub(crate) mod testing {
    //! Build `TensorView`s over Rust-owned memory, as TVM would hand them over.
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
}

#[cfg(test)]
mod tests {
    use super::testing::Owned;
    use super::*;

    #[test]
    fn contiguous_input_is_borrowed() {
        let mut t = Owned::new(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
        let v = t.view();
        let s = input::<f32>(&v, "x").unwrap();
        assert!(matches!(s, Cow::Borrowed(_)));
        assert_eq!(&*s, &[1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn strided_and_offset_input_is_gathered() {
        // A transposed 2x3 view of [[0,1,2],[3,4,5]] stored row-major, offset by one f32.
        let mut t = Owned::strided(vec![9.0f32, 0., 1., 2., 3., 4., 5.], &[3, 2], &[1, 3], 4);
        let v = t.view();
        let s = input::<f32>(&v, "x").unwrap();
        assert_eq!(&*s, &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    #[test]
    fn wrong_dtype_is_a_type_error_naming_the_argument() {
        let mut t = Owned::new(vec![1i64, 2], &[2]);
        let err = input::<f32>(&t.view(), "weight").unwrap_err();
        assert_eq!(err.kind(), TYPE_ERROR);
        assert!(
            err.message()
                .contains("weight: expected dtype float32, got int64"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn strided_input_is_read_in_place() {
        // The transposed 2x3 view of the test above, plus a size-1 dimension.
        let mut t = Owned::strided(
            vec![9.0f32, 0., 1., 2., 3., 4., 5.],
            &[3, 1, 2],
            &[1, 100, 3],
            4,
        );
        let v = t.view();
        let s = strided_input::<f32>(&v, "x").unwrap();
        assert_eq!(s.shape, vec![3, 1, 2]);
        assert_eq!(s.strides, vec![1, 0, 3]);
        assert_eq!(s.data, &[0.0, 1., 2., 3., 4., 5.]);
        let mut n = Owned::strided(vec![0.0f32; 4], &[2, 2], &[-1, 2], 4);
        let err = strided_input::<f32>(&n.view(), "y").err().unwrap();
        assert!(
            err.message()
                .contains("y: negative strides are not supported"),
            "{}",
            err.message()
        );
        let mut e = Owned::new(Vec::<f32>::new(), &[0, 3]);
        assert!(strided_input::<f32>(&e.view(), "z")
            .unwrap()
            .data
            .is_empty());
    }

    #[test]
    fn strided_output_is_refused() {
        let mut t = Owned::strided(vec![0.0f32; 6], &[3, 2], &[1, 3], 0);
        let err = output::<f32>(&t.view(), "out").unwrap_err();
        assert!(err
            .message()
            .contains("out: output tensors must be contiguous"));
    }

    #[test]
    fn shape_checks_name_expected_and_found() {
        let mut t = Owned::new(vec![0.0f32; 6], &[2, 3]);
        let err = expect_shape(&t.view(), "h0", &[3, 2]).unwrap_err();
        assert!(err
            .message()
            .contains("h0: expected shape [3, 2], got [2, 3]"));
        let err = shape_of(&t.view(), "x", 3).unwrap_err();
        assert!(err.message().contains("x: expected rank 3, got rank 2"));
    }
}
