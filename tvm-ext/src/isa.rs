//! The instruction sets that element-wise loops are compiled for. The crate
//! builds for the x86-64 baseline (SSE2), so kernels compile their loops once
//! per set below, behind `#[target_feature]`, and pick one at run time; LLVM
//! then vectorizes plain loops for AVX2 or AVX-512 by itself.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest set this CPU runs (AVX2 and AVX-512 with FMA).
    pub(crate) fn best() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
            {
                return Isa::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}
