//! The one place where errors cross from Rust into Python.
//!
//! tvm-ffi names each error's kind after a Python exception ("ValueError",
//! "TypeError", ...), as TVM's own Python bindings do; we raise that exception,
//! so a caller's `except ValueError` works the same whether the error came
//! through TVM's FFI or through this module.
use pyo3::exceptions::{
    PyAttributeError, PyIndexError, PyKeyError, PyNotImplementedError, PyOverflowError,
    PyRuntimeError, PyTypeError, PyValueError, PyZeroDivisionError,
};
use pyo3::PyErr;

/// `e` as the Python exception its kind names; `RuntimeError` for kinds
/// Python has no builtin for (e.g. tvm-ffi's "InternalError"), with the kind
/// kept in the message.
pub fn to_py(e: &tvm_ffi::Error) -> PyErr {
    let msg = e.message().to_string();
    match e.kind().as_str() {
        "ValueError" => PyValueError::new_err(msg),
        "TypeError" => PyTypeError::new_err(msg),
        "KeyError" => PyKeyError::new_err(msg),
        "IndexError" => PyIndexError::new_err(msg),
        "AttributeError" => PyAttributeError::new_err(msg),
        "OverflowError" => PyOverflowError::new_err(msg),
        "ZeroDivisionError" => PyZeroDivisionError::new_err(msg),
        "NotImplementedError" => PyNotImplementedError::new_err(msg),
        "RuntimeError" => PyRuntimeError::new_err(msg),
        other => PyRuntimeError::new_err(format!("{other}: {msg}")),
    }
}
