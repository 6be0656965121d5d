//! tvm-ext: CPU kernels for Kokoro that compiled Relax code calls through
//! `R.call_dps_packed`, registered in TVM's one FFI registry.
//!
//! This file is registration only. [`FUNCTIONS`] is the single table of
//! `(global name, constructor)` pairs, so the names we report and the names we
//! register can never disagree.
use tvm_ffi::{Function, Result};

pub mod adain;
pub mod batch_matmul;
pub mod bf16;
pub mod conv;
pub mod gemm;
pub mod gemm_bf16;
pub mod lstm;
pub mod matmul;
pub mod sin;
pub mod snake;
pub mod tensor;

/// Every global function name starts with this prefix.
pub const PREFIX: &str = "kokoro_tvm_ext.";

type Constructor = fn() -> Function;

/// The registration table.
pub const FUNCTIONS: &[(&str, Constructor)] = &[
    ("kokoro_tvm_ext.snake", snake::function),
    ("kokoro_tvm_ext.adain", adain::function),
    ("kokoro_tvm_ext.lstm", lstm::function),
    ("kokoro_tvm_ext.conv1d", conv::function),
    ("kokoro_tvm_ext.conv1d_transpose", conv::transpose_function),
    ("kokoro_tvm_ext.matmul", matmul::function),
    ("kokoro_tvm_ext.batch_matmul", batch_matmul::function),
    // precision="bf16": weights packed at compile time, see bf16.rs.
    ("kokoro_tvm_ext.pack_bf16", bf16::pack_function),
    ("kokoro_tvm_ext.bf16_native", bf16::native_function),
    ("kokoro_tvm_ext.conv1d_bf16", bf16::conv1d_function),
    ("kokoro_tvm_ext.conv1d_transpose_bf16", bf16::conv1d_transpose_function),
    ("kokoro_tvm_ext.matmul_bf16", bf16::matmul_function),
];

/// The global names this library registers, in table order.
pub fn function_names() -> Vec<&'static str> {
    FUNCTIONS.iter().map(|(name, _)| *name).collect()
}

/// Sizes rayon's global pool from `TVM_NUM_THREADS`, once per process.
///
/// The kernels run on rayon's global pool. If the environment variable
/// `TVM_NUM_THREADS` holds an integer n > 0, the global pool is built with n
/// threads (so TVM's own thread count and ours agree); otherwise rayon's defaults
/// apply (`RAYON_NUM_THREADS`, else one thread per core). A global pool that
/// already exists (built by another library, or used before this call) is kept.
fn configure_thread_pool() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let n = std::env::var("TVM_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(n) = n.filter(|&n| n > 0) {
            // An error only means the global pool exists already.
            let _ = rayon::ThreadPoolBuilder::new().num_threads(n).build_global();
        }
    });
}

/// Registers every function of [`FUNCTIONS`] in TVM's global registry.
///
/// Names that are registered already are left alone, so calling this twice (or
/// from two copies of the extension) is harmless: the registry refuses a second
/// registration of a name. The first call also applies `TVM_NUM_THREADS` to the
/// kernels' thread pool (see `configure_thread_pool`).
pub fn register_all() -> Result<()> {
    configure_thread_pool();
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
