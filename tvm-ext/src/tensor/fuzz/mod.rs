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
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataType, DLTensor};
use tvm_ffi::{Any, AnyView, Function, Result, TensorView};

use super::testing::Rng;
use super::{Bf16, Element};

mod memory;
mod mutations;

use memory::{Buf, Layout};
pub use mutations::{expect_rejected, run_mutations};

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
