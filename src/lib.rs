//! The Python extension module `kokoro_tvm_ext._native`.
//!
//! Importing it registers every `tvm-ext` function in TVM's global FFI registry.
//! All logic lives in the `tvm-ext` crate; this file only bridges to Python.
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Names of the global functions this library provides, in registration order.
#[pyfunction]
fn registered_functions() -> Vec<&'static str> {
    tvm_ext::function_names()
}

/// Registers the functions; harmless when they are registered already.
#[pyfunction]
fn register_all() -> PyResult<()> {
    tvm_ext::register_all().map_err(|e| PyRuntimeError::new_err(e.message().to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    register_all()?;
    m.add_function(wrap_pyfunction!(registered_functions, m)?)?;
    m.add_function(wrap_pyfunction!(register_all, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
