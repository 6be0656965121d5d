//! Which Relax calls our kernels take, and the kernel call each becomes.
//!
//! A rule returns `Ok(None)` for a call the kernels do not cover (another
//! dtype or layout, an unknown rank); the caller then keeps TVM's own
//! legalization. The kernels read shapes at run time, so symbolic lengths and
//! channel counts are fine; what a rule checks is what the kernel's code
//! assumes: float32 in and out, torch's layouts, the ranks below.
use tvm_ffi::{Any, Result};

use super::ir::{out_dtype_is_f32_or_unset, Node, TensorInfo};
use super::kernel_call::{build, Arg};
use crate::interface::{self, Interface};

/// The operands as f32 tensors of the given ranks (`None`: any rank >= 2), or `None`.
fn f32_operands(call: &Node, ranks: &[Option<i64>]) -> Result<Option<Vec<Node>>> {
    let args = call.nodes("args")?;
    if args.len() != ranks.len() {
        return Ok(None);
    }
    for (arg, rank) in args.iter().zip(ranks) {
        let Some(info) = TensorInfo::of(arg)? else {
            return Ok(None);
        };
        let rank_ok = match rank {
            Some(r) => info.ndim == *r,
            None => info.ndim >= 2,
        };
        if !info.is_f32() || !rank_ok {
            return Ok(None);
        }
    }
    Ok(Some(args))
}

/// The call's attrs, if they ask for float32 output in the layouts given.
fn conv_attrs(call: &Node, layouts: [&str; 3]) -> Result<Option<Node>> {
    let Some(attrs) = call.node("attrs")? else {
        return Ok(None);
    };
    let found = [
        attrs.string("data_layout")?,
        attrs.string("kernel_layout")?,
        attrs.string("out_layout")?,
    ];
    if found != layouts || !out_dtype_is_f32_or_unset(&attrs)? {
        return Ok(None);
    }
    Ok(Some(attrs))
}

/// One value from an attrs' array of one (strides, dilation, output_padding).
fn single(attrs: &Node, name: &str) -> Result<Option<i64>> {
    Ok(match attrs.ints(name)?.as_slice() {
        [v] => Some(*v),
        _ => None,
    })
}

/// `(left, right)` padding: Relax normalizes conv padding to two values.
fn padding(attrs: &Node) -> Result<Option<(i64, i64)>> {
    Ok(match attrs.ints("padding")?.as_slice() {
        [both] => Some((*both, *both)),
        [left, right] => Some((*left, *right)),
        _ => None,
    })
}

/// `relax.nn.conv1d` (NCW data, OIW weight) -> `kokoro_tvm_ext.conv1d`.
pub fn conv1d(call: &Node) -> Result<Option<Any>> {
    convolution(call, "OIW", &interface::CONV1D)
}

/// `relax.nn.conv1d_transpose` (NCW data, IOW weight) -> `kokoro_tvm_ext.conv1d_transpose`.
pub fn conv1d_transpose(call: &Node) -> Result<Option<Any>> {
    convolution(call, "IOW", &interface::CONV1D_TRANSPOSE)
}

/// Either convolution: the attrs both have, plus `output_padding` where the kernel takes it.
fn convolution(call: &Node, kernel_layout: &str, kernel: &Interface) -> Result<Option<Any>> {
    let Some(attrs) = conv_attrs(call, ["NCW", kernel_layout, "NCW"])? else {
        return Ok(None);
    };
    let Some(operands) = f32_operands(call, &[Some(3), Some(3)])? else {
        return Ok(None);
    };
    let (Some(stride), Some((left, right)), Some(dilation)) = (
        single(&attrs, "strides")?,
        padding(&attrs)?,
        single(&attrs, "dilation")?,
    ) else {
        return Ok(None);
    };
    let mut args = vec![
        ("stride", Arg::Int(stride)),
        ("pad_left", Arg::Int(left)),
        ("pad_right", Arg::Int(right)),
        ("dilation", Arg::Int(dilation)),
        ("groups", Arg::Int(attrs.field("groups")?.try_into()?)),
        ("has_bias", Arg::Int(0)),
        ("x", Arg::Expr(operands[0].as_any())),
        ("w", Arg::Expr(operands[1].as_any())),
    ];
    if kernel.has("output_padding") {
        let Some(output_padding) = single(&attrs, "output_padding")? else {
            return Ok(None);
        };
        args.push(("output_padding", Arg::Int(output_padding)));
    }
    build(kernel, call.field("ty")?, &args).map(Some)
}

/// `relax.matmul` of an activation `[..., M, K]` and a 2-D weight `[K, N]`
/// (every linear layer) -> `kokoro_tvm_ext.matmul`.
pub fn matmul(call: &Node) -> Result<Option<Any>> {
    let Some(attrs) = call.node("attrs")? else {
        return Ok(None);
    };
    if !out_dtype_is_f32_or_unset(&attrs)? {
        return Ok(None);
    }
    let Some(args) = f32_operands(call, &[None, Some(2)])? else {
        return Ok(None);
    };
    build(
        &interface::MATMUL,
        call.field("ty")?,
        &[
            ("has_bias", Arg::Int(0)),
            ("x", Arg::Expr(args[0].as_any())),
            ("w", Arg::Expr(args[1].as_any())),
        ],
    )
    .map(Some)
}
