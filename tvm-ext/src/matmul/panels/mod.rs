//! Float32 matmul on weights packed at compile time (by `kokoro_tvm_ext.pack_f32`,
//! see [`crate::gemm::panels`]): the f32 matmul without the per-call packing of
//! its weights. Same semantics and argument checks as the f32 matmul (whose
//! parsing it shares), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.matmul_panels(has_bias, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels (N) come from out.
//! ```
use tvm_ffi::{AnyView, Function, Result};

use super::{call_data, parse_call, WeightKind};
use crate::args::dps_function;
use crate::gemm::panels::{gemm_panels, packed_weights};
use crate::interface;
use crate::job::internal;

#[cfg(test)]
mod tests;

/// The registered `kokoro_tvm_ext.matmul_panels`.
pub fn matmul_function() -> Function {
    dps_function(matmul_packed)
}

fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul_panels";
    let c = parse_call(&interface::MATMUL_PANELS, args, WeightKind::Panels)?;
    let w = packed_weights(WHO, &c.w, c.k, c.n)?;
    let (x, bias, out) = call_data(WHO, &c)?;
    gemm_panels(c.rows, c.k, c.n, &x, &w, bias.as_deref(), out).map_err(|e| internal(WHO, e))
}
