//! What the convolutions on packed weights share, bf16 ([`super::bf16`]) and
//! int8 ([`super::int8`]): the registered functions' shape, torch's weight
//! layout, the checks of a call's buffers, and the f32 kernels they fall back to.
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, VALUE_ERROR};

use super::{conv1d_forward, conv1d_transpose_forward, Conv1dConfig};
use crate::gemm::packed::Kind;

/// A registered convolution: `run(args, transpose)`.
pub(super) fn function(run: fn(&[AnyView], bool) -> Result<()>, transpose: bool) -> Function {
    Function::from_packed(move |args: &[AnyView]| -> Result<Any> {
        run(args, transpose)?;
        Ok(Any::default())
    })
}

/// Torch's weight shape and the packed kind of a call.
pub(super) fn weight_shape(cfg: &Conv1dConfig, transpose: bool) -> (Kind, [usize; 3]) {
    if transpose {
        (
            Kind::Conv1dTranspose,
            [cfg.in_channels, cfg.out_channels / cfg.groups, cfg.kernel],
        )
    } else {
        (
            Kind::Conv1d,
            [cfg.out_channels, cfg.in_channels / cfg.groups, cfg.kernel],
        )
    }
}

/// The output length of a call of `who`, after checking that `x`, `bias` and
/// `out` (and, by `w_fits`, the packed weights) have the lengths `cfg` asks for.
#[allow(clippy::too_many_arguments)]
pub(super) fn checked_out_len(
    who: &str,
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w_fits: bool,
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<usize> {
    let lout = if transpose {
        cfg.transpose_out_len()
    } else {
        cfg.conv_out_len()
    };
    let Some(lout) = lout else {
        bail!(VALUE_ERROR, "{who}: the output would be empty for {cfg:?}");
    };
    let len = |dims: &[usize]| dims.iter().product::<usize>();
    ensure!(
        x.len() == len(&[cfg.batch, cfg.in_channels, cfg.length])
            && w_fits
            && bias.is_none_or(|b| b.len() == cfg.out_channels)
            && out.len() == len(&[cfg.batch, cfg.out_channels, lout]),
        VALUE_ERROR,
        "{who}: buffer lengths do not match {cfg:?}"
    );
    Ok(lout)
}

/// The f32 kernel of a call, on weights `w` in torch's layout: where the
/// precision is not native.
pub(super) fn f32_forward(
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    if transpose {
        conv1d_transpose_forward(cfg, x, w, bias, out)
    } else {
        conv1d_forward(cfg, x, w, bias, out)
    }
}

/// The greatest common divisor (block sizes of whole panels).
pub(super) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
