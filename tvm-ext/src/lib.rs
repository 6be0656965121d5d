//! tvm-ext: CPU kernels for Kokoro that compiled Relax code calls through
//! `R.call_dps_packed`, registered in TVM's one FFI registry.
//!
//! This file is registration only. [`FUNCTIONS`] is the single table of
//! `(global name, constructor)` pairs, so the names we report and the names we
//! register can never disagree.
use tvm_ffi::{Function, Result};

pub mod snake;
pub mod tensor;

/// Every global function name starts with this prefix.
pub const PREFIX: &str = "kokoro_tvm_ext.";

type Constructor = fn() -> Function;

/// The registration table.
pub const FUNCTIONS: &[(&str, Constructor)] = &[
    ("kokoro_tvm_ext.snake", snake::function),
];

/// The global names this library registers, in table order.
pub fn function_names() -> Vec<&'static str> {
    FUNCTIONS.iter().map(|(name, _)| *name).collect()
}

/// Registers every function of [`FUNCTIONS`] in TVM's global registry.
///
/// Names that are registered already are left alone, so calling this twice (or
/// from two copies of the extension) is harmless: the registry refuses a second
/// registration of a name.
pub fn register_all() -> Result<()> {
    for (name, make) in FUNCTIONS {
        if Function::get_global(name).is_ok() {
            continue;
        }
        Function::register_global(name, make())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        let names = function_names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate name in FUNCTIONS");
        for name in names {
            assert!(name.starts_with(PREFIX), "{name} lacks the {PREFIX} prefix");
        }
    }

    #[test]
    fn register_all_makes_every_name_visible_and_is_idempotent() {
        register_all().unwrap();
        register_all().unwrap();
        for name in function_names() {
            assert!(Function::get_global(name).is_ok(), "{name} is not registered");
        }
    }
}
