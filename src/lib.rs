//! The Python extension module `kokoro_tvm_ext._native`.
//!
//! Importing it registers every `tvm-ext` function in TVM's global FFI registry.
//! All logic lives in the `tvm-ext` crate; this file only bridges to Python.
use pyo3::prelude::*;

mod error;

/// Names of the global functions this library provides, in registration order.
#[pyfunction]
fn registered_functions() -> Vec<&'static str> {
    tvm_ext::function_names()
}

/// Registers the functions; harmless when they are registered already.
#[pyfunction]
fn register_all() -> PyResult<()> {
    tvm_ext::register_all().map_err(|e| error::to_py(&e))
}

/// One function's interface as JSON, by short or global name; KeyError if unknown.
#[pyfunction]
fn kernel_interface(name: &str) -> PyResult<String> {
    tvm_ext::interface::json_of(name).map_err(|e| error::to_py(&e))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    register_all()?;
    m.add_function(wrap_pyfunction!(registered_functions, m)?)?;
    m.add_function(wrap_pyfunction!(register_all, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_interface, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
