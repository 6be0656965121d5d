//! The weights of the bf16 kernels: packed once, at compile time, by the
//! registered packer, as the GEMM's operand per group:
//!
//! ```text
//! kokoro_tvm_ext.pack_bf16(kind: "conv1d" | "conv1d_transpose" | "matmul", groups >= 1,
//!                          w: float32) -> bfloat16 tensor, the packed operand per group:
//!   conv1d            w [Cout, Cin/g, K] -> [g, ceil(Cout/g / MR), K*ceil(Cin/g / 2), MR, 2]
//!                     tap-major: a pair holds two channels of one tap (zero past the last)
//!   conv1d_transpose  w [Cin, Cout/g, K] -> [g, ceil(Cout/g*K / NR), ceil(Cin/g / 2), NR, 2]
//!   matmul            w [K, N]           -> [1, ceil(N / NR), ceil(K / 2), NR, 2]   (groups = 1)
//! ```
//!
//! Where the CPU lacks AVX512-BF16 (on aarch64 bf16), or `KOKORO_TVM_EXT_NO_BF16=1`, the kernels
//! unpack the weights to f32 and run the f32 kernels: the same results up to
//! the rounding of the inputs, which then stay f32.
use std::borrow::Cow;

use tvm_ffi::{bail, Any, AnyView, Function, Result, Tensor, TensorView, VALUE_ERROR};

use super::{pack_a, pack_b, pairs, Kind, MR, NR};
use crate::gemm::packed::{as_words, conv_inner, pack_args, PackArgs};
use crate::interface;
use crate::job::{internal, JobError};
use crate::tensor::{expect_shape, input, Bf16};

/// The registered `kokoro_tvm_ext.pack_bf16`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The packed shape of weights `w_shape` (torch's layout) for `kind`.
pub fn packed_shape(kind: Kind, groups: usize, w_shape: &[usize]) -> Vec<i64> {
    let (panels, kp, width) = match (kind, w_shape) {
        (Kind::Conv1d, &[cout, cin_g, k]) => ((cout / groups).div_ceil(MR), k * pairs(cin_g), MR),
        (Kind::Conv1dTranspose, &[cin, cout_g, k]) => {
            ((cout_g * k).div_ceil(NR), pairs(cin / groups), NR)
        }
        (Kind::Matmul, &[k, n]) => (n.div_ceil(NR), pairs(k), NR),
        _ => (0, 0, 0),
    };
    vec![groups as i64, panels as i64, kp as i64, width as i64, 2]
}

fn pack_packed(args: &[AnyView]) -> Result<Tensor> {
    const WHO: &str = "pack_bf16";
    let PackArgs {
        kind,
        groups,
        w: wd,
        shape: ws,
    } = pack_args(&interface::PACK_BF16, args)?;
    let shape = packed_shape(kind, groups, &ws);
    let per_group = (shape[1] * shape[2] * shape[3]) as usize;
    let mut packed = vec![0u32; groups * per_group];
    for (gi, dst) in packed.chunks_exact_mut(per_group).enumerate() {
        let r = match kind {
            Kind::Conv1d => {
                let (cout_g, kc) = (ws[0] / groups, ws[1] * ws[2]);
                pack_conv1d(&wd[gi * cout_g * kc..][..cout_g * kc], ws[1], ws[2], dst)
            }
            Kind::Conv1dTranspose => {
                // Inner: the group's input channels; columns: (o, tap).
                let (cin_g, n) = (ws[0] / groups, ws[1] * ws[2]);
                let w = &wd[gi * cin_g * n..][..cin_g * n];
                pack_b(cin_g, n, |c, j| w[c * n + j], dst)
            }
            Kind::Matmul => pack_b(ws[0], ws[1], |l, j| wd[l * ws[1] + j], dst),
        };
        r.map_err(|e| internal(WHO, e))?;
    }
    // Each u32 holds a pair of bf16s, the lower one first (little-endian, as in memory).
    let halves: Vec<Bf16> = packed
        .iter()
        .flat_map(|&p| [Bf16(p as u16), Bf16((p >> 16) as u16)])
        .collect();
    Tensor::from_slice(&halves, &shape)
}

/// One group of conv1d's weights (`[Cout/g, Cin/g, K]`, torch's layout) as
/// its A operand: rows the output channels, the inner dimension (tap, c), as
/// int8's ([`conv_inner`]).
pub(crate) fn pack_conv1d(
    w: &[f32],
    cin_g: usize,
    taps: usize,
    dst: &mut [u32],
) -> std::result::Result<(), JobError> {
    let kc = cin_g * taps;
    let at = |o: usize, l: usize| conv_inner::<2>(l, cin_g, taps).map_or(0.0, |i| w[o * kc + i]);
    pack_a(w.len() / kc.max(1), 2 * taps * pairs(cin_g), at, dst)
}

/// The packed weights of a call as `u32` pairs, after checking their shape.
pub(crate) fn packed_weights<'a>(
    who: &str,
    w: &TensorView,
    shape: &[i64],
) -> Result<Cow<'a, [u32]>> {
    if let Err(e) = expect_shape(w, &format!("{who}: w"), shape) {
        bail!(
            VALUE_ERROR,
            "{} (weights packed by kokoro_tvm_ext.pack_bf16)",
            e.message()
        );
    }
    let data: Cow<'a, [Bf16]> = input::<Bf16>(w, &format!("{who}: w"))?;
    Ok(as_words(data, |p: [Bf16; 2]| {
        p[0].0 as u32 | (p[1].0 as u32) << 16
    }))
}
