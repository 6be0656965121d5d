//! The plugin's LSTM as a Relax op, `kokoro_tvm_ext.lstm`, so the frontend can
//! emit one call that `LegalizeOps` turns into the kernel (see [`lstm`]) or, with
//! the kernels off, into the TIR implementation Python registers as the op's
//! own `FLegalize` (level 10, `kokoro_tvm_ext.plugin.legalize.switch.lstm_op()`).
//!
//! The op's arguments are the kernel's inputs in the kernel's order
//! ([`interface::LSTM`]): the scalars as int64 prim values, then `x`, the
//! optional `lengths`, `h0`, `c0`, then the weights per layer and direction. Its
//! type is the kernel's outputs: `(y, h_n, c_n)`, float32.
//!
//! TVM's op registry belongs to its compiler library, which a runtime-only
//! process does not load, so [`register`] runs on first need (from Python and
//! from [`super::switch::install`]), not when this library loads.
use std::sync::Mutex;

use tvm_ffi::{Any, AnyView, Array, Function, Result, INTERNAL_ERROR, TYPE_ERROR, VALUE_ERROR};

use super::ir::{self, call_global, int_value, Node, TensorInfo};
use crate::interface::{self, Entry, Kind, Param, When};

/// The op's name, the kernel's global name.
pub const OP: &str = "kokoro_tvm_ext.lstm";

static REGISTERED: Mutex<bool> = Mutex::new(false);

/// Registers the op, its type inference, its purity and its printed name; later calls do nothing.
///
/// An op registered already (by another copy of this library) is left as it is.
pub fn register() -> Result<()> {
    let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if *registered {
        return Ok(());
    }
    let name = tvm_ffi::String::from(OP);
    let names: Array<tvm_ffi::String> = call_global("ir.ListOpNames", &[])?.try_into()?;
    if !names.iter().any(|n| n.as_str() == OP) {
        let description = tvm_ffi::String::from(
            "torch's nn.LSTM with per-sequence lengths: kokoro_tvm_ext's LSTM kernel",
        );
        call_global(
            "ir.RegisterOp",
            &[AnyView::from(&name), AnyView::from(&description)],
        )?;
        let level = 10_i64;
        let infer = Function::from_packed(infer_type);
        let attrs = [
            ("FInferType", Any::from(infer)),
            ("FPurity", Any::from(true)),
            // TVMScript prints ops outside `relax.` by this name, and warns without it.
            ("TScriptPrinterName", Any::from(name.clone())),
        ];
        for (attr, value) in attrs {
            let attr = tvm_ffi::String::from(attr);
            call_global(
                "ir.RegisterOpAttr",
                &[
                    AnyView::from(&name),
                    AnyView::from(&attr),
                    AnyView::from(&value),
                    AnyView::from(&level),
                ],
            )?;
        }
    }
    *registered = true;
    Ok(())
}

/// The op's arguments by name, read in [`interface::LSTM`]'s order.
struct Args {
    ints: Vec<(&'static str, i64)>,
    /// Every tensor; a group's members once per layer and direction, in order.
    tensors: Vec<(&'static str, Node)>,
}

impl Args {
    fn read(call: &Node) -> Result<Args> {
        let args = call.nodes("args")?;
        let mut rest = args.iter();
        let mut read = Args {
            ints: Vec::new(),
            tensors: Vec::new(),
        };
        for entry in interface::LSTM.entries {
            match entry {
                Entry::One(param) if param.kind == Kind::Output => {}
                Entry::One(param) if param.kind.is_scalar() => {
                    let node = next(&mut rest, param, args.len())?;
                    let value = int_value(&node).map_err(|_| {
                        tvm_ffi::Error::new(
                            TYPE_ERROR,
                            &format!(
                                "{OP}: {}: expected an integer constant, got {}",
                                param.name,
                                node.type_key()
                            ),
                            "",
                        )
                    })?;
                    if param.kind == Kind::Flag && !(0..=1).contains(&value) {
                        tvm_ffi::bail!(
                            VALUE_ERROR,
                            "{OP}: {}: expected 0 or 1, got {value}",
                            param.name
                        );
                    }
                    read.ints.push((param.name, value));
                }
                Entry::One(param) => {
                    if read.present(param)? {
                        read.tensors
                            .push((param.name, next(&mut rest, param, args.len())?));
                    }
                }
                Entry::Group { axes, params, .. } => {
                    let mut times = 1;
                    for axis in *axes {
                        times *= (read.int(axis.count)? + axis.plus).max(0);
                    }
                    for _ in 0..times {
                        for param in *params {
                            if read.present(param)? {
                                read.tensors
                                    .push((param.name, next(&mut rest, param, args.len())?));
                            }
                        }
                    }
                }
            }
        }
        let extra = rest.count();
        if extra > 0 {
            tvm_ffi::bail!(
                VALUE_ERROR,
                "{OP}: {extra} arguments more than its flags and num_layers take ({} in all)",
                args.len()
            );
        }
        Ok(read)
    }

    fn int(&self, name: &str) -> Result<i64> {
        match self.ints.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => Ok(*value),
            None => tvm_ffi::bail!(INTERNAL_ERROR, "{OP}: {name} is read before it is known"),
        }
    }

    fn present(&self, param: &Param) -> Result<bool> {
        Ok(match param.when {
            When::Always => true,
            When::Flag(flag) => self.int(flag)? == 1,
            When::Equals(name, value) => self.int(name)? == value,
        })
    }
}

fn next<'a>(
    rest: &mut impl Iterator<Item = &'a Node>,
    param: &Param,
    count: usize,
) -> Result<Node> {
    match rest.next() {
        Some(node) => Ok(node.clone()),
        None => tvm_ffi::bail!(
            VALUE_ERROR,
            "{OP}: {} is missing: {count} arguments are fewer than its flags and num_layers take",
            param.name
        ),
    }
}

/// `FInferType`, `(call, block_builder) -> type`: `(y [d0, d1, D*H], h_n [L*D, B, H], c_n)`,
/// where `x` is `[d0, d1, I]` (`[B, T, I]` when batch_first, else `[T, B, I]`) and `w_hh` `[4H, H]`.
fn infer_type(args: &[AnyView]) -> Result<Any> {
    let [call, _block_builder] = args else {
        tvm_ffi::bail!(
            TYPE_ERROR,
            "{OP}: FInferType: expected (call, block_builder), got {} arguments",
            args.len()
        );
    };
    let call = Node::expect(Any::from(*call), OP)?;
    let read = Args::read(&call)?;
    let mut types = Vec::new();
    for (name, tensor) in &read.tensors {
        match tensor.node("ty")? {
            Some(ty) if TensorInfo::from_type(&ty)?.is_some() => types.push((*name, ty)),
            _ => tvm_ffi::bail!(TYPE_ERROR, "{OP}: {name}: expected a tensor"),
        }
    }
    let num_layers = read.int("num_layers")?;
    if num_layers < 1 {
        tvm_ffi::bail!(
            VALUE_ERROR,
            "{OP}: num_layers: expected a value >= 1, got {num_layers}"
        );
    }
    // Both are always passed (the weights once per layer at least).
    let type_of = |name: &str| &types.iter().find(|(n, _)| *n == name).expect("x, w_hh").1;
    let x_ty = type_of("x");
    match TensorInfo::from_type(x_ty)? {
        Some(info) if info.is_f32() && info.ndim == 3 => {}
        _ => tvm_ffi::bail!(
            TYPE_ERROR,
            "{OP}: x: expected a 3-D float32 tensor, got {}",
            x_ty.type_key()
        ),
    }
    let hidden = match ir::shape_values(type_of("w_hh"))? {
        Some(dims) if dims.len() == 2 => Some(dims[1].clone()),
        Some(dims) => tvm_ffi::bail!(
            TYPE_ERROR,
            "{OP}: w_hh: expected a 2-D tensor [4H, H], got {} dimensions",
            dims.len()
        ),
        None => None,
    };
    let directions = 1 + read.int("bidirectional")?;
    let states = ir::int64(num_layers * directions)?;
    let (y, state) = match (ir::shape_values(x_ty)?, hidden) {
        (Some(x_dims), Some(hidden)) => {
            let batch = x_dims[if read.int("batch_first")? == 1 { 0 } else { 1 }].clone();
            let width = ir::mul(&ir::int64(directions)?, &hidden)?;
            (
                ir::tensor_type(
                    Some(vec![x_dims[0].clone(), x_dims[1].clone(), width]),
                    3,
                    ir::F32,
                )?,
                ir::tensor_type(Some(vec![states, batch, hidden]), 3, ir::F32)?,
            )
        }
        _ => (
            ir::tensor_type(None, 3, ir::F32)?,
            ir::tensor_type(None, 3, ir::F32)?,
        ),
    };
    ir::tuple_type(vec![y, state.clone(), state])
}

/// `kokoro_tvm_ext.lstm(args...)` -> `R.call_dps_packed("kokoro_tvm_ext.lstm", args, out_ty)`,
/// the op's arguments as they are and its type as the outputs'.
pub fn lstm(call: &Node) -> Result<Option<Any>> {
    let args = call.nodes("args")?.iter().map(Node::as_any).collect();
    let kernel = format!("{}{}", crate::PREFIX, interface::LSTM.name);
    ir::call_dps_packed(&kernel, args, call.field("ty")?).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_op_is_named_after_the_kernel() {
        assert_eq!(OP, format!("{}{}", crate::PREFIX, interface::LSTM.name));
    }
}
