//! The instruction sets that kernels compile their loops for. The crate builds
//! for the x86-64 baseline (SSE2), so a kernel compiles its loops once per set
//! below, behind `#[target_feature]`, and picks one at run time; LLVM then
//! vectorizes plain loops for AVX2 or AVX-512 by itself.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest set this CPU runs, detected once: kernels ask on every call.
    pub(crate) fn best() -> Isa {
        static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| *Self::available().last().unwrap_or(&Isa::Portable))
    }

    /// Every set this CPU runs, best last (tests run each): AVX2 and AVX-512
    /// both with FMA.
    pub(crate) fn available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut v = vec![Isa::Portable];
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
    /// each must pick (`Portable`, `Avx2`), so a run that silently got another CPU fails.
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
