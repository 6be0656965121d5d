//! The instruction sets that kernels compile their loops for. The crate builds
//! for each architecture's baseline (SSE2 on x86-64, NEON on aarch64), so a
//! kernel compiles its loops once per set below, behind `#[target_feature]`,
//! and picks one at run time; LLVM then vectorizes plain loops for AVX2 or
//! AVX-512 by itself. On aarch64 the portable loops are already NEON code;
//! `Neon` is the kernels' own NEON (hand-scheduled where LLVM's is not enough).
//! The int8 and bf16 GEMMs read further features (VNNI, BF16; dotprod, i8mm,
//! bf16) in `gemm::int8` and `gemm::bf16`, into `gemm::packed::Isa`.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl Isa {
    /// The widest set this CPU runs, detected once: kernels ask on every call.
    pub(crate) fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| *Self::available().last().unwrap_or(&Isa::Portable))
    }

    /// Every set this CPU runs, best last (tests run each): AVX2 and AVX-512
    /// both with FMA; NEON on every aarch64 CPU (Advanced SIMD is part of ARMv8-A).
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
}
