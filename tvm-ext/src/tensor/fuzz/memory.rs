//! Tensors in memory: where a call's tensors are placed, as TVM could hand them over.
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataType, DLDevice, DLDeviceType, DLTensor};
use tvm_ffi::TensorView;

use super::Spec;
use crate::tensor::testing::Rng;

/// Where a tensor's elements go.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    /// Element strides; `None` passes null strides (row-major).
    pub(super) strides: Option<Vec<i64>>,
    /// Bytes between a 64-byte boundary and the data pointer.
    pub(super) align: usize,
    /// Bytes from the data pointer to the first element.
    pub(super) byte_offset: u64,
    /// Elements before the first one, reached through the pointer.
    pub(super) lead: usize,
}

pub(super) fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1].max(1);
    }
    s
}

impl Layout {
    pub(super) fn dense(item: usize) -> Self {
        Layout {
            strides: Some(vec![]),
            align: 0,
            byte_offset: 0,
            lead: 0,
        }
        .aligned(item)
    }

    fn aligned(mut self, item: usize) -> Self {
        self.align = self.align.next_multiple_of(item) % 64;
        self
    }

    /// Dense (row-major strides or null), at a random element-aligned start.
    pub(super) fn random_dense(rng: &mut Rng, shape: &[i64], item: usize) -> Self {
        let strides = if rng.below(4) == 0 {
            None
        } else {
            Some(row_major(shape))
        };
        let lead = [0, 0, 1, 3][rng.below(4)];
        let (lead, byte_offset) = if rng.below(2) == 0 {
            (lead, 0)
        } else {
            (0, (lead * item) as u64)
        };
        Layout {
            strides,
            align: [0, 4, 32, 8, 16][rng.below(5)],
            byte_offset,
            lead,
        }
        .aligned(item)
    }

    /// Any layout an input may have: the dims stored in a random order, with
    /// gaps, at a random start.
    pub(super) fn random(rng: &mut Rng, shape: &[i64], item: usize) -> Self {
        let mut l = Layout::random_dense(rng, shape, item);
        if rng.below(3) == 0 || shape.is_empty() {
            return l;
        }
        let mut order: Vec<usize> = (0..shape.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut strides = vec![0i64; shape.len()];
        let mut s = 1i64;
        for &d in order.iter().rev() {
            strides[d] = s;
            s *= shape[d].max(1) + [0, 0, 1, 2][rng.below(4)];
        }
        l.strides = Some(strides);
        l
    }

    /// A layout with gaps between rows, never contiguous when a dim but the last has 2+ elements.
    pub(super) fn gapped(shape: &[i64], item: usize) -> Self {
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * (shape[i + 1].max(1) + 1);
        }
        Layout {
            strides: Some(strides),
            ..Layout::dense(item)
        }
    }
}

/// A tensor placed in memory as TVM would hand it over, with NaN around it.
pub struct Buf {
    store: Vec<u64>,
    /// Bytes from `store`'s start to the data pointer.
    start: usize,
    pub(super) shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    pub(super) dtype: DLDataType,
    byte_offset: u64,
    item: usize,
    dl: Box<DLTensor>,
}

impl Buf {
    /// `spec`'s elements in `layout`, with at least `slack` spare bytes after the data pointer.
    pub(super) fn place(spec: &Spec, layout: &Layout, slack: usize) -> Self {
        let dtype = spec.data.dtype();
        let item = (dtype.bits as usize).div_ceil(8);
        let strides = match &layout.strides {
            Some(s) if s.is_empty() => row_major(&spec.shape),
            Some(s) => s.clone(),
            None => row_major(&spec.shape),
        };
        let reach: i64 = if spec.numel() == 0 {
            0
        } else {
            spec.shape
                .iter()
                .zip(&strides)
                .map(|(n, s)| (n - 1) * s)
                .sum::<i64>()
                + 1
        };
        let first = layout.byte_offset as usize + layout.lead * item;
        // Room for 8-byte elements, so a relabelled dtype stays inside the buffer.
        let bytes = (first + reach as usize * 8 + 64).max(slack) + 128;
        let mut store = vec![u64::MAX; bytes.div_ceil(8)];
        let base = store.as_ptr() as usize;
        let start = base.next_multiple_of(64) + layout.align - base;
        let mem = unsafe {
            std::slice::from_raw_parts_mut(store.as_mut_ptr() as *mut u8, store.len() * 8)
        };
        let mut index = vec![0i64; spec.shape.len()];
        for i in 0..spec.numel() {
            let off: i64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            let at = start + first + off as usize * item;
            mem[at..at + item].copy_from_slice(&spec.data.bytes(i));
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < spec.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        let dl = Box::new(DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice::new(DLDeviceType::kDLCPU, 0),
            ndim: spec.shape.len() as i32,
            dtype,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: layout.byte_offset,
        });
        Buf {
            store,
            start: start + layout.lead * item,
            shape: spec.shape.clone(),
            strides: layout.strides.as_ref().map(|_| strides),
            dtype,
            byte_offset: layout.byte_offset,
            item,
            dl,
        }
    }

    pub(super) fn data_ptr(&mut self) -> *mut u8 {
        unsafe { (self.store.as_mut_ptr() as *mut u8).add(self.start) }
    }

    pub(super) fn view(&mut self) -> TensorView {
        self.dl.data = self.data_ptr() as *mut core::ffi::c_void;
        self.dl.ndim = self.shape.len() as i32;
        self.dl.shape = self.shape.as_mut_ptr();
        self.dl.strides = match &mut self.strides {
            Some(s) => s.as_mut_ptr(),
            None => std::ptr::null_mut(),
        };
        self.dl.dtype = self.dtype;
        self.dl.byte_offset = self.byte_offset;
        unsafe { TensorView::from_raw(&*self.dl) }
    }

    /// The f32 elements in row-major order.
    pub(super) fn read_f32(&self) -> Vec<f32> {
        let strides = self
            .strides
            .clone()
            .unwrap_or_else(|| row_major(&self.shape));
        let mem = unsafe {
            std::slice::from_raw_parts(self.store.as_ptr() as *const u8, self.store.len() * 8)
        };
        let n = self.shape.iter().product::<i64>() as usize;
        let mut index = vec![0i64; self.shape.len()];
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let off: i64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            let at = self.start + self.byte_offset as usize + off as usize * self.item;
            out.push(f32::from_le_bytes(mem[at..at + 4].try_into().unwrap()));
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < self.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        out
    }
}
