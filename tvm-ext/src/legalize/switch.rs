//! Whether the kernels' legalizations are in force: installed once into TVM's
//! op-attribute registry, then switched on for the process or for a scope.
//!
//! TVM's `ir.RegisterOpAttr` keeps, per op, the value of the highest priority
//! level registered and cannot take one back (short of resetting the
//! attribute, which would drop TVM's own). So [`install`] registers our
//! handlers once, above TVM's level 10, after saving TVM's handlers; each of
//! ours then hands the call back to TVM's unless [`active`] says otherwise.
//! Until [`install`] runs, TVM's registry is untouched.
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tvm_ffi::{Any, AnyView, Function, ObjectRefCore, Result, RUNTIME_ERROR, VALUE_ERROR};

use super::ir::call_global;
use super::{lstm_op, LEGALIZATIONS};

/// The registry attribute TVM's `LegalizeOps` reads.
const ATTR: &str = "FLegalize";

/// A TVM function kept in a static. TVM functions are immutable and their
/// reference counts atomic, so sharing one between threads is sound.
struct Shared(Function);
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

struct Installed {
    level: i64,
    /// TVM's own handler per op, in [`LEGALIZATIONS`] order.
    stock: Vec<Shared>,
}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);
static PROCESS_WIDE: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Open `kernels_enabled()` scopes on this thread (compiles run on the caller's thread).
    static SCOPES: Cell<u32> = const { Cell::new(0) };
}

fn op_attr(op_name: &str) -> Result<Any> {
    let name = tvm_ffi::String::from(op_name);
    let op = call_global("ir.GetOp", &[AnyView::from(&name)])?;
    let attr = tvm_ffi::String::from(ATTR);
    call_global("ir.OpGetAttr", &[AnyView::from(&op), AnyView::from(&attr)])
}

/// Registers our handlers at priority `level`; a second call with the same level does nothing.
pub fn install(level: i64) -> Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(done) = installed.as_ref() {
        if done.level != level {
            tvm_ffi::bail!(
                VALUE_ERROR,
                "the kernels' legalizations are installed at priority level {} already; TVM cannot \
                 move them to level {level} in this process",
                done.level
            );
        }
        return Ok(());
    }
    if level <= 10 {
        tvm_ffi::bail!(
            VALUE_ERROR,
            "priority level {level} would not replace TVM's own legalizations (level 10): use 11 or more"
        );
    }
    lstm_op::register()?;
    let mut stock = Vec::new();
    for legalization in LEGALIZATIONS {
        let handler: Function = op_attr(legalization.op)?.try_into().map_err(|_| {
            tvm_ffi::Error::new(
                RUNTIME_ERROR,
                &format!(
                    "{} has no FLegalize of its own: {} before enabling the kernels",
                    legalization.op, legalization.stock_from
                ),
                "",
            )
        })?;
        stock.push(Shared(handler));
    }
    for legalization in LEGALIZATIONS {
        let ours = Function::get_global(legalization.handler)?;
        let op_name = tvm_ffi::String::from(legalization.op);
        let attr = tvm_ffi::String::from(ATTR);
        call_global(
            "ir.RegisterOpAttr",
            &[
                AnyView::from(&op_name),
                AnyView::from(&attr),
                AnyView::from(&ours),
                AnyView::from(&level),
            ],
        )?;
        let now: Function = op_attr(legalization.op)?.try_into()?;
        if !now.same_as(&ours) {
            tvm_ffi::bail!(
                VALUE_ERROR,
                "{} has an FLegalize registered at a priority level >= {level}, which TVM keeps: \
                 enable the kernels with a higher level",
                legalization.op
            );
        }
    }
    *installed = Some(Installed { level, stock });
    Ok(())
}

/// TVM's own handler for the legalization at `index` of [`LEGALIZATIONS`].
pub fn stock(index: usize) -> Result<Function> {
    let installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    match installed.as_ref() {
        Some(done) => Ok(done.stock[index].0.clone()),
        None => tvm_ffi::bail!(
            RUNTIME_ERROR,
            "{} was called before the kernels' legalizations were installed \
             (kokoro_tvm_ext.enable_kernels())",
            LEGALIZATIONS[index].handler
        ),
    }
}

pub fn set_process_wide(on: bool) {
    PROCESS_WIDE.store(on, Ordering::SeqCst);
}

pub fn enter_scope() {
    SCOPES.with(|n| n.set(n.get() + 1));
}

pub fn exit_scope() -> Result<()> {
    SCOPES.with(|n| match n.get() {
        0 => tvm_ffi::bail!(RUNTIME_ERROR, "exit_scope without a matching enter_scope"),
        k => {
            n.set(k - 1);
            Ok(())
        }
    })
}

/// Whether calls legalized now go to the kernels.
pub fn active() -> bool {
    PROCESS_WIDE.load(Ordering::SeqCst) || SCOPES.with(|n| n.get() > 0)
}
