//! The mutations every call must refuse (see the module docs of [`super`]).
use tvm_ffi::tvm_ffi_sys::dlpack::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLTensor};
use tvm_ffi::{Any, ErrorKind, Result, TYPE_ERROR, VALUE_ERROR};

use super::memory::{row_major, Buf, Layout};
use super::{invoke, item, place_all, scalar, Arg, Call, Data, Spec, Value};
use crate::tensor::testing::Rng;
use crate::tensor::Bf16;
use tvm_ffi::dtype::AsDLDataType;

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
