//! Link-time settings for the Python extension `kokoro_tvm_ext._native`.
//!
//! The extension links `libtvm_ffi.so` from the apache-tvm-ffi wheel. In site-packages
//! that library lives at `tvm_ffi/lib/`, a sibling of our package, so the rpath is
//! relative to the extension itself. Python also imports `tvm_ffi` before us, so the
//! library is already loaded in editable installs where the rpath does not resolve.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PATH");
    match Command::new("tvm-ffi-config").arg("--libdir").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "\n\nkokoro-tvm-ext needs `tvm-ffi-config` on PATH to find libtvm_ffi.\n\
             Install the pinned runtime first:  pip install apache-tvm-ffi==0.1.15.post2\n\
             (inside a virtualenv, activate it so its bin/ is on PATH).\n"
        ),
    }
    println!("cargo:rustc-link-arg-cdylib=-Wl,-rpath,$ORIGIN/../tvm_ffi/lib");
}
