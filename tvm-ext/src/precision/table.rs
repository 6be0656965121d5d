//! The precision x instruction-set table: per precision, per instruction set,
//! the micro-kernel that runs, its register tile and the packing it reads, as
//! XNNPACK's gemm config is one per data type and instruction set. Filled once
//! per process from the detected CPU ([`selected`]); the kernels dispatch on
//! its answer and never test the CPU themselves, and Python asks the same
//! table (`kokoro_tvm_ext.precision_kernels`) instead of deciding again.
//!
//! docs/architecture.md shows this table; tests/test_kernel_isa_table.py
//! checks the two agree.
use std::sync::OnceLock;

use tvm_ffi::{Any, Function};

use crate::args::query_function;
use crate::interface;
use crate::isa::Isa;

/// One cell of the table: what runs for `precision` on a CPU with `isa`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroKernel {
    /// `f32`, `bf16`, `int8`.
    pub precision: &'static str,
    /// The architecture of `isa`: `x86_64`, `aarch64`, or `any`.
    pub arch: &'static str,
    /// LLVM's name of the feature that defines the set (`avx512vnni`,
    /// `dotprod`), or `portable` (plain Rust, every CPU).
    pub isa: &'static str,
    /// What messages call the set (the CPU "lacks AVX512-VNNI").
    pub name: &'static str,
    /// The micro-kernel, a path under tvm-ext/src and its function.
    pub kernel: &'static str,
    /// The register tile: rows x columns of the output per call.
    pub tile: &'static str,
    /// How the operands are packed (along the inner dimension K).
    pub packing: &'static str,
}

const PAIRS: &str = "pairs of K per u32, A in panels of 8 rows, B of 32 columns";
const QUADS: &str = "quads of K per u32, A in panels of 8 rows, B of 32 columns";

/// Per precision, best first: the first row whose set this CPU runs (and the
/// environment does not hide, [`hiding_variable`]) is the precision's
/// micro-kernel here. The portable rows come last and run on any CPU; for a
/// packed precision they mean "not native": the kernels then run the f32 row
/// on weights unpacked to f32 (faster than the plain-Rust loops).
pub const TABLE: &[MicroKernel] = &[
    MicroKernel {
        precision: "f32",
        arch: "any",
        isa: "portable",
        name: "any CPU",
        kernel: "the gemm-f32 crate (its AVX-512, AVX2 and NEON kernels)",
        tile: "the crate's",
        packing: "none: torch's layout, the crate packs per call",
    },
    MicroKernel {
        precision: "bf16",
        arch: "x86_64",
        isa: "amx-bf16",
        name: "AMX-BF16",
        kernel: "gemm/amx/x86.rs multiply (TDPBF16PS)",
        tile: "32x32",
        packing: "as AVX512-BF16's; A re-laid per call into 16 x 64-byte tiles",
    },
    MicroKernel {
        precision: "bf16",
        arch: "x86_64",
        isa: "avx512bf16",
        name: "AVX512-BF16",
        kernel: "gemm/bf16/x86.rs tile_native (VDPBF16PS)",
        tile: "8x32",
        packing: PAIRS,
    },
    MicroKernel {
        precision: "bf16",
        arch: "aarch64",
        isa: "bf16",
        name: "bf16 (BFDOT)",
        kernel: "gemm/bf16/arm.rs tile_bfdot (BFDOT)",
        tile: "8x32",
        packing: PAIRS,
    },
    MicroKernel {
        precision: "bf16",
        arch: "any",
        isa: "portable",
        name: "plain Rust",
        kernel: "gemm/bf16/mod.rs tile_portable",
        tile: "8x32",
        packing: PAIRS,
    },
    MicroKernel {
        precision: "int8",
        arch: "x86_64",
        isa: "amx-int8",
        name: "AMX-INT8",
        kernel: "gemm/amx/x86.rs multiply (TDPBSUD, TDPBUSD)",
        tile: "32x32",
        packing: "as AVX512-VNNI's; A re-laid per call into 16 x 64-byte tiles",
    },
    MicroKernel {
        precision: "int8",
        arch: "x86_64",
        isa: "avx512vnni",
        name: "AVX512-VNNI",
        kernel: "gemm/int8/x86.rs tile_vnni (VPDPBUSD)",
        tile: "8x32",
        packing: QUADS,
    },
    MicroKernel {
        precision: "int8",
        arch: "aarch64",
        isa: "i8mm",
        name: "i8mm (USMMLA)",
        kernel: "gemm/int8/arm.rs tile_usmmla (USMMLA)",
        tile: "8x32",
        packing: QUADS,
    },
    MicroKernel {
        precision: "int8",
        arch: "aarch64",
        isa: "dotprod",
        name: "dotprod (SDOT)",
        kernel: "gemm/int8/arm.rs tile_sdot (SDOT)",
        tile: "8x32",
        packing: QUADS,
    },
    MicroKernel {
        precision: "int8",
        arch: "any",
        isa: "portable",
        name: "plain Rust",
        kernel: "gemm/int8/mod.rs tile_portable",
        tile: "8x32",
        packing: QUADS,
    },
];

/// The environment variable that hides a precision's instruction sets (any
/// value but empty or "0"), so the fallbacks can be tested on any machine.
pub fn hiding_variable(precision: &str) -> Option<&'static str> {
    match precision {
        "int8" => Some("KOKORO_TVM_EXT_NO_VNNI"),
        "bf16" => Some("KOKORO_TVM_EXT_NO_BF16"),
        _ => None,
    }
}

/// Whether the environment hides `precision`'s instruction sets.
fn hidden(precision: &str) -> bool {
    hiding_variable(precision)
        .and_then(|var| std::env::var(var).ok())
        .is_some_and(|v| !v.is_empty() && v != "0")
}

/// The rows of `precision` this CPU runs, best first (the portable row last),
/// each with its set; only the portable row where `hidden`. Tests run each.
pub(crate) fn runnable(precision: &str, hidden: bool) -> Vec<(&'static MicroKernel, Isa)> {
    TABLE
        .iter()
        .filter(|row| row.precision == precision)
        .filter(|row| row.arch == "any" || row.arch == std::env::consts::ARCH)
        .filter_map(|row| Some((row, Isa::named(row.isa)?)))
        .filter(|(_, isa)| *isa == Isa::Portable || (!hidden && isa.detected()))
        .collect()
}

/// The row that runs for `precision` in this process, chosen once.
pub(crate) fn selected(precision: &str) -> (&'static MicroKernel, Isa) {
    static CHOSEN: OnceLock<Vec<(&'static MicroKernel, Isa)>> = OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| {
        ["f32", "bf16", "int8"]
            .iter()
            .filter_map(|p| runnable(p, hidden(p)).first().copied())
            .collect()
    });
    *chosen
        .iter()
        .find(|(row, _)| row.precision == precision)
        .unwrap_or_else(|| panic!("no row of the precision table for {precision}"))
}

/// Whether `precision`'s kernels compute in it here: its row is its own
/// micro-kernel, not the portable loop (f32 always is).
pub fn native(precision: &str) -> bool {
    precision == "f32" || selected(precision).1 != Isa::Portable
}

/// The table and this process's choices as JSON, for Python:
/// `{"rows": [...], "selected": {"bf16": "avx512bf16", ...}, "hiding": {...}}`.
pub fn to_json() -> String {
    let quoted = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let rows: Vec<String> = TABLE
        .iter()
        .map(|r| {
            format!(
                "{{\"precision\": {}, \"arch\": {}, \"isa\": {}, \"name\": {}, \"kernel\": {}, \"tile\": {}, \"packing\": {}}}",
                quoted(r.precision),
                quoted(r.arch),
                quoted(r.isa),
                quoted(r.name),
                quoted(r.kernel),
                quoted(r.tile),
                quoted(r.packing)
            )
        })
        .collect();
    let precisions = ["f32", "bf16", "int8"];
    let selected: Vec<String> = precisions
        .iter()
        .map(|p| format!("{}: {}", quoted(p), quoted(selected(p).0.isa)))
        .collect();
    let hiding: Vec<String> = precisions
        .iter()
        .filter_map(|p| Some(format!("{}: {}", quoted(p), quoted(hiding_variable(p)?))))
        .collect();
    format!(
        "{{\"arch\": {}, \"rows\": [{}], \"selected\": {{{}}}, \"hiding\": {{{}}}}}",
        quoted(std::env::consts::ARCH),
        rows.join(", "),
        selected.join(", "),
        hiding.join(", ")
    )
}

/// The registered `kokoro_tvm_ext.precision_kernels() -> str`: [`to_json`].
pub fn function() -> Function {
    query_function(&interface::PRECISION_KERNELS, || {
        Any::from(tvm_ffi::String::from(to_json().as_str()))
    })
}

/// The registered `kokoro_tvm_ext.int8_native() -> bool`.
pub fn int8_native_function() -> Function {
    query_function(&interface::INT8_NATIVE, || Any::from(native("int8")))
}

/// The registered `kokoro_tvm_ext.bf16_native() -> bool`.
pub fn bf16_native_function() -> Function {
    query_function(&interface::BF16_NATIVE, || Any::from(native("bf16")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_precision_ends_with_a_portable_row_that_any_cpu_runs() {
        for precision in ["f32", "bf16", "int8"] {
            let rows: Vec<_> = TABLE.iter().filter(|r| r.precision == precision).collect();
            let last = rows.last().unwrap();
            assert_eq!((last.arch, last.isa), ("any", "portable"), "{precision}");
            assert_eq!(runnable(precision, true), [(*last, Isa::Portable)]);
        }
    }

    #[test]
    fn every_row_of_this_architecture_names_a_set_of_the_crate() {
        for row in TABLE.iter().filter(|r| r.arch == std::env::consts::ARCH) {
            assert!(Isa::named(row.isa).is_some(), "{row:?}");
        }
    }

    /// The pick is the best row whose set this CPU runs, and what the
    /// registered queries and the GEMMs use.
    #[test]
    fn the_pick_is_the_first_runnable_row() {
        for precision in ["bf16", "int8"] {
            let hiding = hidden(precision);
            assert_eq!(selected(precision), runnable(precision, hiding)[0]);
            assert_eq!(native(precision), selected(precision).1 != Isa::Portable);
        }
        assert_eq!(selected("bf16").1, crate::gemm::bf16::isa());
        assert_eq!(selected("int8").1, crate::gemm::int8::isa());
        assert!(to_json().contains(&format!("\"int8\": \"{}\"", selected("int8").0.isa)));
    }
}
