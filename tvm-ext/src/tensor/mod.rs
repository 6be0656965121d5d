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

impl Element for i8 {}

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
pub(crate) mod testing;
#[cfg(test)]
mod tests;
