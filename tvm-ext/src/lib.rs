//! tvm-ext: CPU kernels for Kokoro that compiled Relax code calls through
//! `R.call_dps_packed`, registered in TVM's one FFI registry.
//!
//! This file is registration only. [`KERNELS`] and [`SETTINGS`] are the tables
//! of `(global name, constructor)` pairs, so the names we report and the names
//! we register can never disagree.
use tvm_ffi::{Any, AnyView, Function, Result};

pub mod adain;
pub mod args;
pub mod conv;
pub mod counters;
mod exp;
pub mod gemm;
pub mod interface;
mod isa;
mod job;
pub mod legalize;
pub mod lstm;
pub mod matmul;
pub mod peaks;
pub mod precision;
mod scratch;
pub mod sin;
pub mod snake;
pub mod softmax;
pub mod tensor;
pub mod threads;

/// Every global function name starts with this prefix.
pub const PREFIX: &str = "kokoro_tvm_ext.";

type Constructor = fn() -> Function;

/// The kernels: each call first sizes the thread pool (see [`register_all`]).
pub const KERNELS: &[(&str, Constructor)] = &[
    ("kokoro_tvm_ext.snake", snake::function),
    ("kokoro_tvm_ext.adain", adain::function),
    ("kokoro_tvm_ext.lstm", lstm::function),
    ("kokoro_tvm_ext.conv1d", conv::function),
    ("kokoro_tvm_ext.conv1d_transpose", conv::transpose_function),
    ("kokoro_tvm_ext.matmul", matmul::function),
    ("kokoro_tvm_ext.batch_matmul", matmul::batch::function),
    ("kokoro_tvm_ext.softmax", softmax::function),
    // Weights transformed at compile time, see conv/winograd/.
    (
        "kokoro_tvm_ext.pack_winograd",
        conv::winograd::pack_function,
    ),
    (
        "kokoro_tvm_ext.conv1d_winograd",
        conv::winograd::conv1d_function,
    ),
    // precision="bf16": weights packed at compile time, see gemm/bf16/.
    ("kokoro_tvm_ext.pack_bf16", gemm::bf16::pack_function),
    (
        "kokoro_tvm_ext.bf16_native",
        precision::table::bf16_native_function,
    ),
    ("kokoro_tvm_ext.conv1d_bf16", conv::bf16::conv1d_function),
    (
        "kokoro_tvm_ext.conv1d_transpose_bf16",
        conv::bf16::conv1d_transpose_function,
    ),
    ("kokoro_tvm_ext.matmul_bf16", matmul::bf16::matmul_function),
    // precision="int8": weights quantized at compile time, see gemm/int8/.
    ("kokoro_tvm_ext.pack_int8", gemm::int8::pack_function),
    (
        "kokoro_tvm_ext.int8_native",
        precision::table::int8_native_function,
    ),
    ("kokoro_tvm_ext.conv1d_int8", conv::int8::conv1d_function),
    (
        "kokoro_tvm_ext.conv1d_transpose_int8",
        conv::int8::conv1d_transpose_function,
    ),
    ("kokoro_tvm_ext.matmul_int8", matmul::int8::matmul_function),
    // Every precision: f32 matmul weights in panels, packed at compile time, see gemm/panels/.
    ("kokoro_tvm_ext.pack_f32", gemm::panels::pack_function),
    (
        "kokoro_tvm_ext.matmul_panels",
        matmul::panels::matmul_function,
    ),
];

/// Process-wide settings, which must run before the first kernel call.
pub const SETTINGS: &[(&str, Constructor)] = &[
    ("kokoro_tvm_ext.set_num_threads", threads::function),
    ("kokoro_tvm_ext.counters", counters::function),
];

/// Descriptions of the functions above, read by Python (`python/kokoro_tvm_ext/plugin/kernels.py`).
pub const INFO: &[(&str, Constructor)] = &[
    (
        "kokoro_tvm_ext.kernel_interfaces",
        args::interfaces_function,
    ),
    (
        "kokoro_tvm_ext.precision_kernels",
        precision::table::function,
    ),
    ("kokoro_tvm_ext.measure_peaks", peaks::function),
];

/// The global names this library registers, in table order.
pub fn function_names() -> Vec<&'static str> {
    KERNELS
        .iter()
        .chain(SETTINGS)
        .chain(INFO)
        .chain(legalize::FUNCTIONS)
        .map(|(name, _)| *name)
        .collect()
}

/// Registers every function of [`KERNELS`], [`SETTINGS`], [`INFO`] and
/// [`legalize::FUNCTIONS`] in TVM's global registry (registering the legalization
/// handlers as global functions does not install them into TVM's op registry).
///
/// Names that are registered already are left alone, so calling this twice (or
/// from two copies of the extension) is harmless: the registry refuses a second
/// registration of a name. Each kernel call first makes sure the thread pool is
/// sized (`threads::size_pool_from_env`), which is why the count can still be
/// chosen after the library loads.
pub fn register_all() -> Result<()> {
    // Check-then-register is two registry calls: one caller at a time, or two threads
    // (the cargo tests) race and the second registration of a name fails.
    static REGISTERING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = REGISTERING.lock().unwrap_or_else(|e| e.into_inner());
    counters::set_from_env();
    let unregistered = |name: &str| Function::get_global(name).is_err();
    for (name, make) in SETTINGS.iter().chain(INFO).chain(legalize::FUNCTIONS) {
        if unregistered(name) {
            Function::register_global(name, make())?;
        }
    }
    for (name, make) in KERNELS {
        if unregistered(name) {
            let kernel = make();
            let sized_first = Function::from_packed(move |args: &[AnyView]| -> Result<Any> {
                threads::size_pool_from_env();
                counters::count(name, || kernel.call_packed(args))
            });
            Function::register_global(name, sized_first)?;
        }
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
        assert_eq!(sorted.len(), names.len(), "duplicate name in the tables");
        for name in names {
            assert!(name.starts_with(PREFIX), "{name} lacks the {PREFIX} prefix");
        }
    }

    #[test]
    fn register_all_makes_every_name_visible_and_is_idempotent() {
        register_all().unwrap();
        register_all().unwrap();
        for name in function_names() {
            assert!(
                Function::get_global(name).is_ok(),
                "{name} is not registered"
            );
        }
    }
}
