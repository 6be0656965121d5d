//! The instruction sets that kernels compile their loops for, one enum for the
//! crate. The crate builds for each architecture's baseline (SSE2 on x86-64,
//! NEON on aarch64), so a kernel compiles its loops once per set below, behind
//! `#[target_feature]`, and picks one at run time; LLVM then vectorizes plain
//! loops for AVX2 or AVX-512 by itself. On aarch64 the portable loops are
//! already NEON code; `Neon` is the kernels' own NEON (hand-scheduled where
//! LLVM's is not enough).
//!
//! Two kinds of sets: the vector sets (`Portable`, `Avx2`, `Avx512`, `Neon`),
//! which the f32 kernels pick from ([`Isa::best`]), and the dot-product sets
//! (`Avx512Vnni`, `Avx512Bf16`, `Dotprod`, `I8mm`, `NeonBf16`), which extend a
//! vector set and which the packed GEMMs' micro-kernels use, as the precision x
//! instruction-set table (`precision/table.rs`) picks them. An f32 kernel
//! handed a dot-product set runs the vector set it extends.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// AVX-512 (F, BW, VL) with VNNI's `VPDPBUSD`: int8 dot products.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// AVX-512 (F, BW) with `VDPBF16PS`: bf16 dot products.
    #[cfg(target_arch = "x86_64")]
    Avx512Bf16,
    /// AMX's int8 tiles (`TDPBSUD`, `TDPBUSD`) beside AVX512-VNNI, whose
    /// packing and epilogue they share; Linux must grant the process the tile
    /// state ([`amx_granted`]).
    #[cfg(target_arch = "x86_64")]
    AmxInt8,
    /// AMX's bf16 tiles (`TDPBF16PS`) beside AVX512-BF16, likewise.
    #[cfg(target_arch = "x86_64")]
    AmxBf16,
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// NEON's `SDOT` (FEAT_DotProd): int8 dot products.
    #[cfg(target_arch = "aarch64")]
    Dotprod,
    /// NEON's `USMMLA` (FEAT_I8MM): int8 matrix multiply-accumulate.
    #[cfg(target_arch = "aarch64")]
    I8mm,
    /// NEON's `BFDOT` (FEAT_BF16): bf16 dot products.
    #[cfg(target_arch = "aarch64")]
    NeonBf16,
}

impl Isa {
    /// The widest vector set this CPU runs, detected once: kernels ask on every call.
    pub(crate) fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| *Self::available().last().unwrap_or(&Isa::Portable))
    }

    /// Every vector set this CPU runs, best last (tests run each): AVX2 and
    /// AVX-512 both with FMA; NEON on every aarch64 CPU (Advanced SIMD is part
    /// of ARMv8-A).
    pub(crate) fn available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut v = vec![Isa::Portable];
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("neon") {
                v.push(Isa::Neon);
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                v.push(Isa::Avx2);
                if is_x86_feature_detected!("avx512f") {
                    v.push(Isa::Avx512);
                }
            }
        }
        v
    }

    /// The set named by `feature` (LLVM's name of the feature that defines
    /// it, as the precision table writes it) on this architecture, if any.
    pub(crate) fn named(feature: &str) -> Option<Isa> {
        Some(match feature {
            "portable" => Isa::Portable,
            #[cfg(target_arch = "x86_64")]
            "avx2" => Isa::Avx2,
            #[cfg(target_arch = "x86_64")]
            "avx512f" => Isa::Avx512,
            #[cfg(target_arch = "x86_64")]
            "avx512vnni" => Isa::Avx512Vnni,
            #[cfg(target_arch = "x86_64")]
            "avx512bf16" => Isa::Avx512Bf16,
            #[cfg(target_arch = "x86_64")]
            "amx-int8" => Isa::AmxInt8,
            #[cfg(target_arch = "x86_64")]
            "amx-bf16" => Isa::AmxBf16,
            #[cfg(target_arch = "aarch64")]
            "neon" => Isa::Neon,
            #[cfg(target_arch = "aarch64")]
            "dotprod" => Isa::Dotprod,
            #[cfg(target_arch = "aarch64")]
            "i8mm" => Isa::I8mm,
            #[cfg(target_arch = "aarch64")]
            "bf16" => Isa::NeonBf16,
            _ => return None,
        })
    }

    /// Whether this CPU runs the set, with what its loops also use.
    pub(crate) fn detected(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => Self::available().contains(&self),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
                    && is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Bf16 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512bf16")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::AmxInt8 => Isa::Avx512Vnni.detected() && amx_granted(AMX_INT8),
            #[cfg(target_arch = "x86_64")]
            Isa::AmxBf16 => Isa::Avx512Bf16.detected() && amx_granted(AMX_BF16),
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::Dotprod => std::arch::is_aarch64_feature_detected!("dotprod"),
            #[cfg(target_arch = "aarch64")]
            Isa::I8mm => std::arch::is_aarch64_feature_detected!("i8mm"),
            #[cfg(target_arch = "aarch64")]
            Isa::NeonBf16 => std::arch::is_aarch64_feature_detected!("bf16"),
        }
    }
}

/// CPUID leaf 7's EDX bits of AMX-TILE, AMX-INT8 and AMX-BF16.
#[cfg(target_arch = "x86_64")]
const AMX_TILE: u32 = 1 << 24;
#[cfg(target_arch = "x86_64")]
const AMX_INT8: u32 = 1 << 25;
#[cfg(target_arch = "x86_64")]
const AMX_BF16: u32 = 1 << 22;

/// Whether this process may run AMX tiles with the products of `bit`: the CPU
/// has AMX-TILE and them (CPUID leaf 7, EDX; `is_x86_feature_detected!` does
/// not name them on stable Rust) and Linux (5.16 or later) grants the tile
/// data state on `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, asked
/// once, which every thread of the process then has. `KOKORO_TVM_EXT_NO_AMX=1`
/// hides AMX alone (the kernels then run AVX512-VNNI and AVX512-BF16), to
/// measure or test one against the other.
#[cfg(target_arch = "x86_64")]
fn amx_granted(bit: u32) -> bool {
    static GRANTED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let edx = GRANTED.get_or_init(|| {
        if std::env::var("KOKORO_TVM_EXT_NO_AMX").is_ok_and(|v| !v.is_empty() && v != "0") {
            return None;
        }
        // SAFETY: CPUID leaf 7 exists on every x86-64 CPU that runs AVX-512.
        #[allow(unused_unsafe)]
        let edx = unsafe { std::arch::x86_64::__cpuid_count(7, 0) }.edx;
        (edx & AMX_TILE != 0 && request_tile_state()).then_some(edx)
    });
    edx.is_some_and(|edx| edx & bit != 0)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request_tile_state() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with these arguments only changes what the kernel lets
    // this process's threads save; it reads and writes no memory of ours.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(all(target_arch = "x86_64", not(target_os = "linux")))]
fn request_tile_state() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::Isa;

    /// scripts/test-portability.sh runs the tests on emulated CPUs and names the set
    /// each must pick (`Portable`, `Avx2`; `Neon` under qemu-aarch64), so a run that
    /// silently got another CPU fails.
    #[test]
    fn detects_the_instruction_set_the_portability_run_expects() {
        let Ok(want) = std::env::var("TVM_EXT_EXPECT_ISA") else {
            return; // a native run: whatever this CPU has is right
        };
        assert_eq!(
            format!("{:?}", Isa::best()),
            want,
            "emulated CPU: {:?}",
            Isa::available()
        );
    }

    #[test]
    fn every_vector_set_found_is_detected_and_named() {
        for isa in Isa::available() {
            assert!(isa.detected(), "{isa:?}");
        }
        assert_eq!(Isa::named("portable"), Some(Isa::Portable));
        assert_eq!(Isa::named("sse9"), None);
    }
}
