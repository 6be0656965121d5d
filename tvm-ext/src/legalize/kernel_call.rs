//! `call_dps_packed` to one of our kernels, its arguments given by name and put
//! in the order [`crate::interface`] describes (the Rust twin of
//! `kokoro_tvm_ext.plugin.kernels.call`).
use tvm_ffi::{Any, Result, INTERNAL_ERROR};

use super::ir;
use crate::interface::{Entry, Interface, Kind, When};

/// One named argument.
pub enum Arg {
    /// An int or flag scalar.
    Int(i64),
    /// A tensor expression.
    Expr(Any),
}

/// `R.call_dps_packed("kokoro_tvm_ext.<kernel>", args, out_ty)`.
pub fn build(kernel: &Interface, out_ty: Any, args: &[(&str, Arg)]) -> Result<Any> {
    let who = kernel.name;
    let find = |name: &str| args.iter().find(|(n, _)| *n == name).map(|(_, a)| a);
    let int_of = |name: &str| match find(name) {
        Some(Arg::Int(v)) => Ok(*v),
        _ => Err(tvm_ffi::Error::new(
            INTERNAL_ERROR,
            &format!("{who}: the int argument {name} is missing"),
            "",
        )),
    };
    for (name, _) in args {
        if !kernel.has(name) {
            tvm_ffi::bail!(INTERNAL_ERROR, "{who}: no parameter named {name}");
        }
    }
    let mut fields = Vec::new();
    for entry in kernel.entries {
        let Entry::One(param) = entry else {
            tvm_ffi::bail!(INTERNAL_ERROR, "{who}: repeated groups are not built here");
        };
        let present = match param.when {
            When::Always => true,
            When::Flag(flag) => int_of(flag)? == 1,
            When::Equals(name, value) => int_of(name)? == value,
        };
        match (param.kind, present, find(param.name)) {
            (Kind::Output, ..) | (_, false, None) => {}
            (Kind::Int | Kind::Flag, true, Some(Arg::Int(v))) => fields.push(ir::int64(*v)?),
            (Kind::Tensor, true, Some(Arg::Expr(e))) => fields.push(e.clone()),
            (kind, present, given) => tvm_ffi::bail!(
                INTERNAL_ERROR,
                "{who}: argument {} ({}) is {} but was {}",
                param.name,
                kind.name(),
                if present { "expected" } else { "absent" },
                match given {
                    None => "not given",
                    Some(Arg::Int(_)) => "given an int",
                    Some(Arg::Expr(_)) => "given an expression",
                }
            ),
        }
    }
    ir::call_dps_packed(&format!("{}{who}", crate::PREFIX), fields, out_ty)
}
