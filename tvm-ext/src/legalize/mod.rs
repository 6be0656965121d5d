//! FLegalize handlers that send Relax's convolutions and linear layers, and our
//! LSTM op, to our kernels, so any model compiled with stock `tvm.compile` can use them.
//!
//! TVM's `LegalizeOps` pass (in every Relax pipeline) turns each high-level
//! op into TIR through the op's `FLegalize` attribute. Ours, registered from
//! here, turn the calls the kernels cover (see [`rules`]) into
//! `call_dps_packed` calls to them and hand every other call to TVM's own.
//! They are off until Python asks (`kokoro_tvm_ext.enable_kernels()` or
//! `with kokoro_tvm_ext.kernels_enabled():`); see [`switch`].
//!
//! Global functions, all `kokoro_tvm_ext.legalize.*`:
//! - `conv1d`, `conv1d_transpose`, `matmul`, `lstm`: the handlers, `(block_builder, call) -> expr`;
//! - `register_lstm_op()`: registers the Relax op `kokoro_tvm_ext.lstm` (see [`lstm_op`]);
//! - `to_kernel(call)`: the kernel call for `call`, or None (what our own
//!   pipeline uses, before TVM legalizes);
//! - `install(level)`, `set_enabled(on)`, `enter_scope()`, `exit_scope()`,
//!   `active()`: the switch.
use tvm_ffi::{Any, AnyView, Function, Result, TYPE_ERROR};

pub mod ir;
mod kernel_call;
pub mod lstm_op;
pub mod rules;
pub mod switch;

use ir::Node;

/// One Relax op the kernels take over.
pub struct Legalization {
    /// The Relax op, e.g. `relax.nn.conv1d`.
    pub op: &'static str,
    /// The global name of our handler.
    pub handler: &'static str,
    pub rule: fn(&Node) -> Result<Option<Any>>,
    /// What registers the op's own `FLegalize`, which ours hands other calls to (for messages).
    pub stock_from: &'static str,
}

pub const LEGALIZATIONS: &[Legalization] = &[
    Legalization {
        op: "relax.nn.conv1d",
        handler: "kokoro_tvm_ext.legalize.conv1d",
        rule: rules::conv1d,
        stock_from: TVM,
    },
    Legalization {
        op: "relax.nn.conv1d_transpose",
        handler: "kokoro_tvm_ext.legalize.conv1d_transpose",
        rule: rules::conv1d_transpose,
        stock_from: TVM,
    },
    Legalization {
        op: "relax.matmul",
        handler: "kokoro_tvm_ext.legalize.matmul",
        rule: rules::matmul,
        stock_from: TVM,
    },
    Legalization {
        op: lstm_op::OP,
        handler: "kokoro_tvm_ext.legalize.lstm",
        rule: lstm_op::lstm,
        stock_from: "`kokoro_tvm_ext.plugin.legalize.switch.lstm_op()` (its TIR implementation)",
    },
];

const TVM: &str = "`import tvm.relax`";

/// Every global name of this module starts with this.
pub const PREFIX: &str = "kokoro_tvm_ext.legalize.";

type Constructor = fn() -> Function;

/// Every global function of this module, `(name, constructor)`.
pub const FUNCTIONS: &[(&str, Constructor)] = &[
    ("kokoro_tvm_ext.legalize.conv1d", || handler(0)),
    ("kokoro_tvm_ext.legalize.conv1d_transpose", || handler(1)),
    ("kokoro_tvm_ext.legalize.matmul", || handler(2)),
    ("kokoro_tvm_ext.legalize.lstm", || handler(3)),
    ("kokoro_tvm_ext.legalize.register_lstm_op", || {
        Function::from_typed(lstm_op::register)
    }),
    ("kokoro_tvm_ext.legalize.to_kernel", to_kernel_function),
    ("kokoro_tvm_ext.legalize.install", || {
        Function::from_typed(|level: i64| switch::install(level))
    }),
    ("kokoro_tvm_ext.legalize.set_enabled", || {
        Function::from_typed(|on: bool| -> Result<()> {
            switch::set_process_wide(on);
            Ok(())
        })
    }),
    ("kokoro_tvm_ext.legalize.enter_scope", || {
        Function::from_typed(|| -> Result<()> {
            switch::enter_scope();
            Ok(())
        })
    }),
    ("kokoro_tvm_ext.legalize.exit_scope", || {
        Function::from_typed(switch::exit_scope)
    }),
    ("kokoro_tvm_ext.legalize.active", || {
        Function::from_typed(|| -> Result<bool> { Ok(switch::active()) })
    }),
];

/// The `FLegalize` handler for `LEGALIZATIONS[index]`: our kernel when active and the call fits, else TVM's.
fn handler(index: usize) -> Function {
    let legalization = &LEGALIZATIONS[index];
    Function::from_packed(move |args: &[AnyView]| -> Result<Any> {
        let [_block_builder, call] = args else {
            tvm_ffi::bail!(
                TYPE_ERROR,
                "{}: expected (block_builder, call), got {} arguments",
                legalization.handler,
                args.len()
            );
        };
        if switch::active() {
            let call = Node::expect(Any::from(*call), legalization.handler)?;
            if let Some(kernel_call) = (legalization.rule)(&call)? {
                return Ok(kernel_call);
            }
        }
        switch::stock(index)?.call_packed(args)
    })
}

/// The kernel call for a Relax call, or None when no rule takes it.
pub fn to_kernel(call: &Node) -> Result<Option<Any>> {
    let Some(op) = call.node("op")? else {
        return Ok(None);
    };
    if op.type_key() != "ir.Op" {
        return Ok(None);
    }
    let name = op.string("name")?;
    match LEGALIZATIONS.iter().find(|l| l.op == name) {
        Some(legalization) => (legalization.rule)(call),
        None => Ok(None),
    }
}

fn to_kernel_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        let [call] = args else {
            tvm_ffi::bail!(
                TYPE_ERROR,
                "to_kernel: expected (call,), got {} arguments",
                args.len()
            );
        };
        let call = Node::expect(Any::from(*call), "to_kernel")?;
        Ok(to_kernel(&call)?.unwrap_or_default())
    })
}
