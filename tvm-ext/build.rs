//! `cargo test` binaries of this crate load libtvm_ffi; give them an rpath to the
//! directory `tvm-ffi-config --libdir` reports (the tvm-ffi crate sets no rpath).
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PATH");
    let out = Command::new("tvm-ffi-config").arg("--libdir").output();
    let libdir = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => panic!(
            "\n\ntvm-ext needs `tvm-ffi-config` on PATH to find libtvm_ffi.\n\
             Install it with:  pip install apache-tvm-ffi==0.1.15.post2\n"
        ),
    };
    // Applies to binaries this crate links itself (its test harnesses); the rlib
    // carries no link arguments to dependents such as the Python extension.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
}
