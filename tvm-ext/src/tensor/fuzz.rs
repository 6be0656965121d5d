//! Property tests at the FFI boundary (issue #20): every registered kernel is
//! called through its global function, as TVM calls it, with random memory
//! layouts, and with mutations it must refuse.
//!
//! A kernel's test builds one valid [`Call`] from random shapes, with the
//! outputs a plain reference computes, and hands it to [`check`], which
//! 1. calls it with every input in a random layout (row-major or permuted,
//!    gaps between rows, null strides, offsets through the pointer or
//!    `byte_offset`, start addresses 4, 32 or 64-byte aligned) and every
//!    output dense at a random alignment, and compares the outputs;
//! 2. calls it once per mutation and expects an error of the right kind whose
//!    message names the mutated argument: each tensor with a wrong dtype, a
//!    wrong rank, a misaligned start (pointer or `byte_offset`), a wrong shape
//!    (tensors whose shape the other arguments fix), an int in its place; each
//!    output strided and sharing memory with an input; each scalar given a
//!    tensor; one argument too few and too many; the kernel's bad scalar values.
//!
//! Memory around and between the elements is NaN, so a kernel that reads
//! outside its elements or leaves an output element unwritten shows up as a
//! wrong answer (and under `scripts/memcheck.sh`, as an invalid read or write).
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvm_ffi::{Any, AnyView, ErrorKind, Function, Result, TensorView, TYPE_ERROR, VALUE_ERROR};

use super::testing::Rng;
use super::{Bf16, Element};
use crate::conv::Conv1dConfig;

/// A tensor's elements in row-major order.
#[derive(Clone, Debug)]
pub enum Data {
    F32(Vec<f32>),
    Bf16(Vec<Bf16>),
    I64(Vec<i64>),
}

impl Data {
    fn dtype(&self) -> DLDataType {
        match self {
            Data::F32(_) => f32::DL_DATA_TYPE,
            Data::Bf16(_) => Bf16::DL_DATA_TYPE,
            Data::I64(_) => i64::DL_DATA_TYPE,
        }
    }

    fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::Bf16(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    fn bytes(&self, i: usize) -> Vec<u8> {
        match self {
            Data::F32(v) => v[i].to_le_bytes().to_vec(),
            Data::Bf16(v) => v[i].0.to_le_bytes().to_vec(),
            Data::I64(v) => v[i].to_le_bytes().to_vec(),
        }
    }
}

use tvm_ffi::dtype::AsDLDataType;

/// One tensor argument.
#[derive(Clone, Debug)]
pub struct Spec {
    pub data: Data,
    pub shape: Vec<i64>,
    /// A destination the kernel writes (its `data` is ignored).
    pub output: bool,
    /// The other arguments fix this tensor's shape, so a wrong one is blamed on it.
    pub derived: bool,
    /// Only this rank is accepted (else the kernel takes a range of ranks and
    /// the rank mutation is skipped).
    pub fixed_rank: bool,
}

impl Spec {
    pub fn input(data: Vec<f32>, shape: &[i64]) -> Self {
        assert_eq!(data.len() as i64, shape.iter().product::<i64>());
        Spec {
            data: Data::F32(data),
            shape: shape.to_vec(),
            output: false,
            derived: false,
            fixed_rank: true,
        }
    }

    /// An input whose shape the other arguments fix.
    pub fn derived(data: Vec<f32>, shape: &[i64]) -> Self {
        Spec {
            derived: true,
            ..Spec::input(data, shape)
        }
    }

    pub fn output(shape: &[i64]) -> Self {
        let n = shape.iter().product::<i64>() as usize;
        Spec {
            data: Data::F32(vec![0.0; n]),
            shape: shape.to_vec(),
            output: true,
            derived: true,
            fixed_rank: true,
        }
    }

    pub fn with_data(mut self, data: Data) -> Self {
        assert_eq!(data.len() as i64, self.shape.iter().product::<i64>());
        self.data = data;
        self
    }

    /// A tensor whose shape decides others' (the packed kernels' `out`).
    pub fn deciding(mut self) -> Self {
        self.derived = false;
        self
    }

    pub fn any_rank(mut self) -> Self {
        self.fixed_rank = false;
        self
    }

    fn numel(&self) -> usize {
        self.shape.iter().product::<i64>() as usize
    }
}

/// One argument of a call.
#[derive(Clone, Debug)]
pub enum Value {
    Int(i64),
    Float(f64),
    Str(&'static str),
    Tensor(Spec),
}

/// A valid call, what it must give, and the scalar values it must refuse.
#[derive(Clone)]
pub struct Call {
    /// The global name, `kokoro_tvm_ext.<name>`.
    pub global: &'static str,
    /// The arguments in call order, each by its interface name.
    pub args: Vec<(&'static str, Value)>,
    /// Per output: (value, sum of |terms|) per element, from a reference.
    pub want: Vec<(&'static str, Vec<(f64, f64)>)>,
    /// Each output element within `rel * (1 + sum of |terms|)`.
    pub rel: f64,
    /// Scalar values the kernel must refuse with a ValueError naming the scalar.
    pub bad: Vec<(&'static str, Value)>,
}

// ---------------------------------------------------------------------------
// Tensors in memory.
// ---------------------------------------------------------------------------

/// Where a tensor's elements go.
#[derive(Clone, Debug)]
struct Layout {
    /// Element strides; `None` passes null strides (row-major).
    strides: Option<Vec<i64>>,
    /// Bytes between a 64-byte boundary and the data pointer.
    align: usize,
    /// Bytes from the data pointer to the first element.
    byte_offset: u64,
    /// Elements before the first one, reached through the pointer.
    lead: usize,
}

fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1].max(1);
    }
    s
}

impl Layout {
    fn dense(item: usize) -> Self {
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
    fn random_dense(rng: &mut Rng, shape: &[i64], item: usize) -> Self {
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
    fn random(rng: &mut Rng, shape: &[i64], item: usize) -> Self {
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
    fn gapped(shape: &[i64], item: usize) -> Self {
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
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    dtype: DLDataType,
    byte_offset: u64,
    item: usize,
    dl: Box<DLTensor>,
}

impl Buf {
    /// `spec`'s elements in `layout`, with at least `slack` spare bytes after the data pointer.
    fn place(spec: &Spec, layout: &Layout, slack: usize) -> Self {
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

    fn data_ptr(&mut self) -> *mut u8 {
        unsafe { (self.store.as_mut_ptr() as *mut u8).add(self.start) }
    }

    fn view(&mut self) -> TensorView {
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
    fn read_f32(&self) -> Vec<f32> {
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

// ---------------------------------------------------------------------------
// Calling.
// ---------------------------------------------------------------------------

/// An argument as passed: scalars, placed tensors, or a dense f32 `shape`
/// view starting at another argument's data pointer (to share its memory).
enum Arg {
    Int(i64),
    Float(f64),
    Str(tvm_ffi::String),
    Buf(Buf),
    Window {
        of: usize,
        shape: Vec<i64>,
        strides: Vec<i64>,
        dl: Box<DLTensor>,
    },
}

fn invoke(global: &str, args: &mut [Arg]) -> Result<Any> {
    crate::register_all()?;
    let f = Function::get_global(global)?;
    let starts: Vec<*mut u8> = args
        .iter_mut()
        .map(|a| match a {
            Arg::Buf(b) => b.data_ptr(),
            _ => std::ptr::null_mut(),
        })
        .collect();
    let mut views: Vec<Option<TensorView>> = Vec::with_capacity(args.len());
    for a in args.iter_mut() {
        views.push(match a {
            Arg::Buf(b) => Some(b.view()),
            Arg::Window {
                of,
                shape,
                strides,
                dl,
            } => {
                dl.data = starts[*of] as *mut core::ffi::c_void;
                dl.shape = shape.as_mut_ptr();
                dl.strides = strides.as_mut_ptr();
                Some(unsafe { TensorView::from_raw(&**dl) })
            }
            _ => None,
        });
    }
    let any: Vec<AnyView> = args
        .iter()
        .zip(&views)
        .map(|(a, v)| match (a, v) {
            (Arg::Int(i), _) => AnyView::from(i),
            (Arg::Float(x), _) => AnyView::from(x),
            (Arg::Str(s), _) => AnyView::from(s),
            (_, Some(v)) => AnyView::from(v),
            _ => unreachable!(),
        })
        .collect();
    f.call_packed(&any)
}

fn scalar(v: &Value) -> Arg {
    match v {
        Value::Int(i) => Arg::Int(*i),
        Value::Float(x) => Arg::Float(*x),
        Value::Str(s) => Arg::Str(tvm_ffi::String::from(*s)),
        Value::Tensor(_) => unreachable!(),
    }
}

/// The arguments of `call`, each tensor placed by `layout(index, spec)`.
fn place_all(call: &Call, mut layout: impl FnMut(usize, &Spec) -> (Layout, usize)) -> Vec<Arg> {
    call.args
        .iter()
        .enumerate()
        .map(|(i, (_, v))| match v {
            Value::Tensor(s) => {
                let (l, slack) = layout(i, s);
                Arg::Buf(Buf::place(s, &l, slack))
            }
            v => scalar(v),
        })
        .collect()
}

fn item(s: &Spec) -> usize {
    (s.data.dtype().bits as usize).div_ceil(8)
}

/// Runs the valid call with random layouts and compares its outputs.
pub fn run_valid(call: &Call, rng: &mut Rng) {
    let mut args = place_all(call, |_, s| {
        let l = if s.output {
            Layout::random_dense(rng, &s.shape, item(s))
        } else {
            Layout::random(rng, &s.shape, item(s))
        };
        (l, 0)
    });
    if let Err(e) = invoke(call.global, &mut args) {
        panic!(
            "{}: a valid call failed: {}: {}",
            call.global,
            e.kind(),
            e.message()
        );
    }
    for (name, want) in &call.want {
        let k = call.args.iter().position(|(n, _)| n == name).unwrap();
        let Arg::Buf(b) = &args[k] else {
            unreachable!()
        };
        let got = b.read_f32();
        assert_eq!(got.len(), want.len(), "{}: {name}: length", call.global);
        for (i, (g, (v, mag))) in got.iter().zip(want).enumerate() {
            let tol = call.rel * (1.0 + mag);
            assert!(
                (*g as f64 - v).abs() <= tol,
                "{}: {name}[{i}] of shape {:?}: got {g}, want {v} (tol {tol})",
                call.global,
                b.shape
            );
        }
    }
}

/// `r` is an error of `kind` whose message names `name`.
fn expect_error(what: &str, r: Result<Any>, kind: ErrorKind, name: &str) {
    let e = match r {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => e,
    };
    let msg = e.message().to_string();
    let named = [
        format!(" {name}:"),
        format!(" {name}["),
        format!("{name}: "),
    ]
    .iter()
    .any(|p| msg.contains(p.as_str()))
        || msg.ends_with(&format!(" {name}"));
    assert!(
        e.kind() == kind && named,
        "{what}: want a {kind} naming `{name}`, got {}: {msg}",
        e.kind()
    );
}

/// `call` (dense) is refused with a ValueError naming `name`.
pub fn expect_rejected(call: &Call, name: &str) {
    let mut args = place_all(call, |_, s| (Layout::dense(item(s)), 0));
    let r = invoke(call.global, &mut args);
    expect_error(
        &format!("{}: bad {name}", call.global),
        r,
        VALUE_ERROR,
        name,
    );
}

/// Runs `call` with `arg` replaced.
fn with(call: &Call, index: usize, arg: Arg) -> Result<Any> {
    let mut args = place_all(call, |_, s| (Layout::dense(item(s)), 0));
    args[index] = arg;
    invoke(call.global, &mut args)
}

fn relabelled(s: &Spec, dtype: DLDataType) -> Buf {
    let mut b = Buf::place(s, &Layout::dense(item(s)), 0);
    b.dtype = dtype;
    b
}

const F64: DLDataType = DLDataType {
    code: DLDataTypeCode::kDLFloat as u8,
    bits: 64,
    lanes: 1,
};
const F16: DLDataType = DLDataType {
    code: DLDataTypeCode::kDLFloat as u8,
    bits: 16,
    lanes: 1,
};
const I32: DLDataType = DLDataType {
    code: DLDataTypeCode::kDLInt as u8,
    bits: 32,
    lanes: 1,
};
const F32X2: DLDataType = DLDataType {
    code: DLDataTypeCode::kDLFloat as u8,
    bits: 32,
    lanes: 2,
};

/// Runs every mutation of `call`; see the module docs.
pub fn run_mutations(call: &Call, rng: &mut Rng) {
    let who = call.global;
    let n = call.args.len();
    // One argument too few, one too many.
    let mut args = place_all(call, |_, s| (Layout::dense(item(s)), 0));
    if args.pop().is_some() {
        let e = invoke(who, &mut args)
            .err()
            .expect("one argument too few is refused");
        assert_eq!(e.kind(), VALUE_ERROR, "{who}: {}", e.message());
        assert!(e.message().contains("expected"), "{who}: {}", e.message());
    }
    let mut args = place_all(call, |_, s| (Layout::dense(item(s)), 0));
    args.push(Arg::Int(0));
    let e = invoke(who, &mut args)
        .err()
        .expect("one argument too many is refused");
    assert_eq!(e.kind(), VALUE_ERROR, "{who}: {}", e.message());

    for (name, value) in &call.bad {
        let k = call.args.iter().position(|(n, _)| n == name).unwrap();
        let what = format!("{who}: {name} = {value:?}");
        expect_error(&what, with(call, k, scalar(value)), VALUE_ERROR, name);
    }

    let first_tensor = call
        .args
        .iter()
        .position(|(_, v)| matches!(v, Value::Tensor(_)));
    for k in 0..n {
        let (name, value) = &call.args[k];
        let what = |m: &str| format!("{who}: {name}: {m}");
        let Value::Tensor(s) = value else {
            // A tensor where a scalar goes.
            let t = Spec::input(vec![1.0], &[1]);
            let r = with(call, k, Arg::Buf(Buf::place(&t, &Layout::dense(4), 0)));
            expect_error(&what("a tensor"), r, TYPE_ERROR, name);
            continue;
        };
        let it = item(s);
        // An int where a tensor goes.
        expect_error(
            &what("an int"),
            with(call, k, Arg::Int(1)),
            TYPE_ERROR,
            name,
        );
        // Wrong dtypes, the data relabelled in place.
        let right = s.data.dtype();
        let wrong: Vec<DLDataType> = [F64, F16, I32, F32X2, f32::DL_DATA_TYPE, Bf16::DL_DATA_TYPE]
            .into_iter()
            .filter(|d| *d != right)
            .collect();
        let d = wrong[rng.below(wrong.len())];
        expect_error(
            &what(&format!("dtype {d:?}")),
            with(call, k, Arg::Buf(relabelled(s, d))),
            TYPE_ERROR,
            name,
        );
        // A wrong rank: one more dim of 1, or one fewer.
        let ranks: Vec<Vec<i64>> = if s.fixed_rank {
            let mut more = s.shape.clone();
            more.push(1);
            let mut fewer = s.shape.clone();
            fewer.pop();
            if s.shape.is_empty() {
                vec![more]
            } else {
                vec![more, fewer]
            }
        } else {
            // Ranges of ranks start at 1 (matmul) or 2 (batch_matmul): rank 0.
            vec![vec![]]
        };
        for shape in ranks {
            let bad = Spec {
                shape,
                data: Data::F32(vec![]),
                ..s.clone()
            };
            let bad = Spec {
                data: filler(&s.data, bad.numel()),
                ..bad
            };
            let r = with(call, k, Arg::Buf(Buf::place(&bad, &Layout::dense(it), 0)));
            expect_error(
                &what(&format!("shape {:?}", bad.shape)),
                r,
                VALUE_ERROR,
                name,
            );
        }
        // A wrong extent where the other arguments fix the shape.
        if s.derived && !s.shape.is_empty() {
            let mut shape = s.shape.clone();
            let d = rng.below(shape.len());
            shape[d] += 1;
            let bad = Spec {
                data: filler(&s.data, shape.iter().product::<i64>() as usize),
                shape,
                ..s.clone()
            };
            let r = with(call, k, Arg::Buf(Buf::place(&bad, &Layout::dense(it), 0)));
            expect_error(
                &what(&format!("shape {:?}", bad.shape)),
                r,
                VALUE_ERROR,
                name,
            );
        }
        if s.numel() > 0 {
            // A start that is not element-aligned, through the pointer or byte_offset.
            for (align, byte_offset) in [(1, 0u64), (it / 2 + 1, 0), (0, 1), (0, it as u64 + 1)] {
                if align % it == 0 && byte_offset % it as u64 == 0 {
                    continue;
                }
                let l = Layout {
                    align,
                    byte_offset,
                    ..Layout::dense(it)
                };
                let r = with(call, k, Arg::Buf(Buf::place(s, &l, 0)));
                expect_error(
                    &what(&format!(
                        "address {align} mod 64, byte_offset {byte_offset}"
                    )),
                    r,
                    VALUE_ERROR,
                    name,
                );
            }
        }
        if !s.output {
            continue;
        }
        // A strided output.
        let gapped = Layout::gapped(&s.shape, it);
        if s.shape[..s.shape.len().saturating_sub(1)]
            .iter()
            .any(|&d| d > 1)
            && s.numel() > 0
        {
            let r = with(call, k, Arg::Buf(Buf::place(s, &gapped, 0)));
            expect_error(&what("strided"), r, VALUE_ERROR, name);
        }
        // An output sharing memory with each nonempty tensor before it.
        if s.numel() == 0 {
            continue;
        }
        for j in first_tensor.unwrap()..k {
            let Value::Tensor(other) = &call.args[j].1 else {
                continue;
            };
            if other.numel() == 0 {
                continue;
            }
            let bytes = s.numel() * it;
            let mut args = place_all(call, |i, t| {
                (Layout::dense(item(t)), if i == j { bytes } else { 0 })
            });
            let shape = s.shape.clone();
            args[k] = Arg::Window {
                of: j,
                strides: row_major(&shape),
                shape,
                dl: Box::new(DLTensor {
                    data: std::ptr::null_mut(),
                    device: DLDevice::new(DLDeviceType::kDLCPU, 0),
                    ndim: s.shape.len() as i32,
                    dtype: right,
                    shape: std::ptr::null_mut(),
                    strides: std::ptr::null_mut(),
                    byte_offset: 0,
                }),
            };
            let r = invoke(who, &mut args);
            expect_error(
                &what(&format!("sharing memory with {}", call.args[j].0)),
                r,
                VALUE_ERROR,
                name,
            );
        }
    }
}

/// `n` elements of `like`'s dtype.
fn filler(like: &Data, n: usize) -> Data {
    match like {
        Data::F32(_) => Data::F32(vec![0.5; n]),
        Data::Bf16(_) => Data::Bf16(vec![Bf16(0x3f00); n]),
        Data::I64(_) => Data::I64(vec![1; n]),
    }
}

/// Runs the valid call with random layouts, then every mutation.
pub fn check(call: &Call, rng: &mut Rng) {
    run_valid(call, rng);
    run_mutations(call, rng);
}

/// Calls `global` on `args` (dense tensors) and returns the tensor it gives back.
pub fn call_returning(
    global: &str,
    args: &[(&'static str, Value)],
    rng: &mut Rng,
) -> Result<tvm_ffi::Tensor> {
    let call = Call {
        global: "",
        args: args.to_vec(),
        want: vec![],
        rel: 0.0,
        bad: vec![],
    };
    let mut placed = place_all(&call, |_, s| (Layout::random(rng, &s.shape, item(s)), 0));
    let any = invoke(global, &mut placed)?;
    tvm_ffi::Tensor::try_from(any)
}

/// The elements of a dense host tensor.
pub fn elements<E: Element + Copy>(t: &tvm_ffi::Tensor) -> Vec<E> {
    assert_eq!(t.dtype(), E::DL_DATA_TYPE);
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const E, t.numel()) }.to_vec()
}

/// A random size: 0 and 1 often, else up to `max`.
pub fn size(rng: &mut Rng, max: usize) -> usize {
    match rng.below(5) {
        0 => 0,
        1 => 1,
        _ => rng.below(max + 1),
    }
}

// ---------------------------------------------------------------------------
// Convolutions: the geometry five kernels share.
// ---------------------------------------------------------------------------

/// A random geometry with an output of at least one element along L.
fn random_config(rng: &mut Rng, transpose: bool) -> Conv1dConfig {
    loop {
        let groups = 1 + rng.below(3);
        let c = Conv1dConfig {
            batch: size(rng, 2),
            in_channels: groups * (1 + rng.below(4)),
            out_channels: groups * (1 + rng.below(4)),
            length: size(rng, 20),
            kernel: 1 + rng.below(5),
            stride: 1 + rng.below(3),
            pad_left: rng.below(4),
            pad_right: rng.below(4),
            dilation: 1 + rng.below(3),
            groups,
            output_padding: 0,
        };
        let c = Conv1dConfig {
            output_padding: if transpose {
                rng.below(c.stride.max(c.dilation))
            } else {
                0
            },
            ..c
        };
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        };
        if lout.is_some() {
            return c;
        }
    }
}

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

/// One random convolution call: geometry, data, and the parts of its argument list.
pub struct ConvCase {
    pub c: Conv1dConfig,
    pub transpose: bool,
    pub has_bias: bool,
    pub x: Vec<f32>,
    pub w: Vec<f32>,
    pub bias: Vec<f32>,
}

impl ConvCase {
    /// Draws, in this order: the geometry, has_bias, x, w, bias.
    pub fn random(rng: &mut Rng, transpose: bool) -> ConvCase {
        let c = random_config(rng, transpose);
        let has_bias = rng.below(2) == 1;
        let x = rng.vec(c.batch * c.in_channels * c.length);
        let mut case = ConvCase {
            c,
            transpose,
            has_bias,
            x,
            w: Vec::new(),
            bias: Vec::new(),
        };
        case.w = rng.vec(case.w_shape().iter().product());
        case.bias = rng.vec(case.c.out_channels);
        case
    }

    /// torch's weight layouts: `[out, in / groups, k]`, transposed `[in, out / groups, k]`.
    pub fn w_shape(&self) -> [usize; 3] {
        let c = &self.c;
        if self.transpose {
            [c.in_channels, c.out_channels / c.groups, c.kernel]
        } else {
            [c.out_channels, c.in_channels / c.groups, c.kernel]
        }
    }

    /// The naive reference on `x` and `w` (the case's own, or rounded copies).
    pub fn reference(&self, x: &[f32], w: &[f32]) -> Vec<(f64, f64)> {
        let b = self.has_bias.then_some(&self.bias[..]);
        if self.transpose {
            crate::conv::reference::reference_transpose(&self.c, x, w, b)
        } else {
            crate::conv::reference::reference_conv(&self.c, x, w, b)
        }
    }

    pub fn out_shape(&self) -> [i64; 3] {
        let lout = if self.transpose {
            self.c.transpose_out_len()
        } else {
            self.c.conv_out_len()
        };
        [
            self.c.batch as i64,
            self.c.out_channels as i64,
            lout.unwrap() as i64,
        ]
    }

    /// The kernel's global name: the f32 or the bf16 one.
    pub fn global(&self, bf16: bool) -> &'static str {
        match (self.transpose, bf16) {
            (false, false) => "kokoro_tvm_ext.conv1d",
            (true, false) => "kokoro_tvm_ext.conv1d_transpose",
            (false, true) => "kokoro_tvm_ext.conv1d_bf16",
            (true, true) => "kokoro_tvm_ext.conv1d_transpose_bf16",
        }
    }

    /// The scalars (then `extra`), `x`, the given `w` and the bias when there is one; `out` is the caller's.
    pub fn args(&self, w: Spec, extra: &[(&'static str, i64)]) -> Vec<(&'static str, Value)> {
        let c = &self.c;
        let i = |v: usize| v as i64;
        let mut args = conv_scalars(c, self.transpose, self.has_bias, extra);
        let x = Spec::input(self.x.clone(), &[i(c.batch), i(c.in_channels), i(c.length)]);
        args.push(("x", Value::Tensor(x)));
        args.push(("w", Value::Tensor(w)));
        if self.has_bias {
            let bias = Spec::derived(self.bias.clone(), &[i(c.out_channels)]);
            args.push(("bias", Value::Tensor(bias)));
        }
        args
    }
}

/// The scalars of a conv1d (or conv1d_transpose) call, then `extra` (the
/// packed kernels' kernel_size).
pub fn conv_scalars(
    c: &Conv1dConfig,
    transpose: bool,
    has_bias: bool,
    extra: &[(&'static str, i64)],
) -> Vec<(&'static str, Value)> {
    let mut v = vec![
        ("stride", c.stride as i64),
        ("pad_left", c.pad_left as i64),
        ("pad_right", c.pad_right as i64),
    ];
    if transpose {
        v.push(("output_padding", c.output_padding as i64));
    }
    v.extend([
        ("dilation", c.dilation as i64),
        ("groups", c.groups as i64),
        ("has_bias", has_bias as i64),
    ]);
    v.extend(extra);
    v.into_iter().map(|(n, i)| (n, Value::Int(i))).collect()
}

/// The scalar values every convolution refuses.
pub fn conv_bad_scalars(c: &Conv1dConfig, transpose: bool) -> Vec<(&'static str, Value)> {
    let mut bad = vec![
        ("stride", Value::Int(0)),
        ("pad_left", Value::Int(-1)),
        ("pad_right", Value::Int(-2)),
        ("dilation", Value::Int(0)),
        ("groups", Value::Int(0)),
        ("has_bias", Value::Int(2)),
    ];
    if transpose {
        bad.push(("output_padding", Value::Int(-1)));
        bad.push((
            "output_padding",
            Value::Int(c.stride.max(c.dilation) as i64),
        ));
    }
    bad
}
