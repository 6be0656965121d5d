//! Float32 1-D convolution and transposed convolution with the semantics of
//! `torch.nn.functional.conv1d` / `conv_transpose1d` (zero padding, dilation,
//! groups), as Kokoro's vocoder uses them.
//!
//! Global names, destination-passing, called packed because `has_bias` decides
//! whether the bias tensor is present (prim ints first, then tensors):
//!
//! ```text
//! kokoro_tvm_ext.conv1d(stride >= 1, pad_left >= 0, pad_right >= 0, dilation >= 1,
//!                       groups >= 1, has_bias: 0/1,
//!   x:    float32 [B, Cin, L]            (any strides)
//!   w:    float32 [Cout, Cin/groups, K]  (any strides)
//!   bias: float32 [Cout]                 -- only if has_bias
//!   OUT out: float32 [B, Cout, Lout]     (contiguous)
//! )   Lout = (L + pad_left + pad_right - dilation*(K-1) - 1) / stride + 1
//!
//! kokoro_tvm_ext.conv1d_transpose(stride >= 1, pad_left >= 0, pad_right >= 0,
//!                       output_padding >= 0, dilation >= 1, groups >= 1, has_bias: 0/1,
//!   x:    float32 [B, Cin, L]            (any strides)
//!   w:    float32 [Cin, Cout/groups, K]  (torch's ConvTranspose1d layout, any strides)
//!   bias: float32 [Cout]                 -- only if has_bias
//!   OUT out: float32 [B, Cout, Lout]     (contiguous)
//! )   Lout = (L-1)*stride - pad_left - pad_right + dilation*(K-1) + output_padding + 1
//! ```
//!
//! Groups must divide both channel counts, `Lout` must be at least 1 and equal
//! `out`'s last dimension, and (as torch requires) `output_padding` must be
//! smaller than `stride` or `dilation`. torch's symmetric `padding=p` is
//! `pad_left = pad_right = p`; for the transposed convolution the pads crop the
//! full result on each side.
//!
//! How it runs (both kernels use both cores through rayon's global pool):
//!
//! - conv1d: per batch item, group and tile of output columns, the tile's
//!   im2col block `[Cin/g * K, T]` (sized to stay in L2) is built and multiplied
//!   by the weights, which already are the row-major `[Cout/g, Cin/g * K]` matrix
//!   it needs, straight into `out` (prefilled with the bias). One GEMM with an
//!   inner dimension of `Cin/g * K` per tile, no full im2col in memory.
//! - conv1d_transpose: per batch item, group and block of output channels
//!   (sized so the block's weights `w[:, o0..o0+n, :]`, a `[Cin/g, n*K]` block of
//!   torch's own layout, stay in L2; no repacking), the input is walked in
//!   tiles: one GEMM `cols[t, (o, k)] = sum_c x[c, t] * w[c, o, k]` per tile,
//!   then each `(t, o)` adds its K contiguous values to
//!   `out[o, t*stride - pad_left + k*dilation]` (col2im), clipped to the output.
//!   The job owns its output rows, so no two threads ever add to one element.
//! - Groups so small that a GEMM would be mostly overhead (depthwise, for
//!   Kokoro's `ConvTranspose1d(C, C, 3, stride 2, groups=C)`: fewer than 4
//!   input channels, or fewer than 8 output columns `Cout/g * K`) run a direct
//!   loop per output row instead.
//!
//! [`conv1d_forward`] and [`conv1d_transpose_forward`] are the same kernels for
//! plain Rust callers.
//!
//! The parameters are listed once in [`crate::interface`] (`CONV1D`,
//! `CONV1D_TRANSPOSE`).
//!
//! This folder holds every convolution: the f32 kernels above, their
//! `precision="bf16"` and `precision="int8"` variants ([`bf16`]: `conv1d_bf16`,
//! `conv1d_transpose_bf16`; [`int8`]) and Winograd's F(m, r) for stride-1
//! convolutions ([`winograd`]: `conv1d_winograd`). Files: `call.rs` reads a
//! call (shared by all of them), `plan.rs` splits the work into jobs (tiles,
//! channel blocks, the job runner), `driver.rs` is the one tile driver of every
//! precision (im2col, bias, GEMM, col2im) over its `ConvPrecision` steps,
//! `kernels.rs` holds the f32 precision's steps and the direct paths,
//! `bf16/` and `int8/` theirs, `packed.rs` the checks the packed precisions
//! share; for tests, `reference.rs` holds the definitions they compare to and
//! `testing.rs` the random calls of the property tests.
use std::borrow::Cow;

use rayon::prelude::*;
use tvm_ffi::{bail, ensure, AnyView, Function, Result, TensorView, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::gemm::{sgemm, sgemm_shared, threads, F32Gemm, Layout, SharedMut};
use crate::interface::{self, Interface};
use crate::job::{internal, JobError};
use crate::scratch::Scratch;
use crate::tensor::{
    byte_span, check_dtype, dim, expect_len, expect_shape, input, output, shape_of, Bf16,
};

/// The largest accepted prim int (stride, pads, dilation, groups).
const MAX_PRIM: i64 = i32::MAX as i64;

/// The geometry of one call. `output_padding` is only used by the transposed
/// convolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv1dConfig {
    pub batch: usize,
    pub in_channels: usize,
    pub out_channels: usize,
    /// `L`, the input length.
    pub length: usize,
    /// `K`, the kernel size, at least 1.
    pub kernel: usize,
    pub stride: usize,
    pub pad_left: usize,
    pub pad_right: usize,
    pub dilation: usize,
    pub groups: usize,
    pub output_padding: usize,
}

impl Conv1dConfig {
    /// `Lout` of `conv1d`, `None` when it would be below 1.
    pub fn conv_out_len(&self) -> Option<usize> {
        let span = self.dilation as i128 * (self.kernel as i128 - 1) + 1;
        let padded = self.length as i128 + self.pad_left as i128 + self.pad_right as i128;
        if padded < span || self.stride == 0 {
            return None;
        }
        usize::try_from((padded - span) / self.stride as i128 + 1).ok()
    }

    /// `Lout` of `conv1d_transpose`, `None` when it would be below 1.
    pub fn transpose_out_len(&self) -> Option<usize> {
        let n = (self.length as i128 - 1) * self.stride as i128
            - self.pad_left as i128
            - self.pad_right as i128
            + self.dilation as i128 * (self.kernel as i128 - 1)
            + self.output_padding as i128
            + 1;
        if n < 1 {
            return None;
        }
        usize::try_from(n).ok()
    }

    fn check(&self, who: &str) -> Result<()> {
        ensure!(
            self.kernel >= 1,
            VALUE_ERROR,
            "{who}: w: the kernel size must be at least 1"
        );
        ensure!(
            self.stride >= 1,
            VALUE_ERROR,
            "{who}: stride: expected a value >= 1, got 0"
        );
        ensure!(
            self.dilation >= 1,
            VALUE_ERROR,
            "{who}: dilation: expected a value >= 1, got 0"
        );
        ensure!(
            self.groups >= 1,
            VALUE_ERROR,
            "{who}: groups: expected a value >= 1, got 0"
        );
        ensure!(
            self.in_channels.is_multiple_of(self.groups),
            VALUE_ERROR,
            "{who}: groups: {} does not divide the {} input channels of x",
            self.groups,
            self.in_channels
        );
        ensure!(
            self.out_channels.is_multiple_of(self.groups),
            VALUE_ERROR,
            "{who}: groups: {} does not divide the {} output channels",
            self.groups,
            self.out_channels
        );
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Packed entry points.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.conv1d`.
pub fn function() -> Function {
    dps_function(conv1d_packed)
}

/// The registered `kokoro_tvm_ext.conv1d_transpose`.
pub fn transpose_function() -> Function {
    dps_function(conv1d_transpose_packed)
}

pub mod bf16;
mod call;
mod driver;
pub mod int8;
mod kernels;
mod packed;
mod plan;
#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
pub mod winograd;

pub(crate) use call::{call_data, parse_call, ConvCall, WeightKind};
use driver::{conv_tiles, transpose_tiles};
use kernels::{conv_direct, transpose_direct};
pub(crate) use plan::{
    col2im, fill_bias, im2col_row, run_jobs, run_parallel, valid_range, Blocks, Plan, Tuning,
    TUNING,
};

/// A plain-Rust entry point: `(cfg, x, w, bias, out)`.
type Kernel = fn(&Conv1dConfig, &[f32], &[f32], Option<&[f32]>, &mut [f32]) -> Result<()>;

/// Checks the f32 weights' shape, reads the data and runs `kernel`.
fn run_checked(who: &str, c: &ConvCall, transpose: bool, kernel: Kernel) -> Result<()> {
    let cfg = &c.cfg;
    let (cin_g, cout_g) = (cfg.in_channels / cfg.groups, cfg.out_channels / cfg.groups);
    let w_shape = if transpose {
        [cfg.in_channels, cout_g, cfg.kernel]
    } else {
        [cfg.out_channels, cin_g, cfg.kernel]
    };
    expect_shape(&c.t.w, &format!("{who}: w"), &w_shape.map(|d| d as i64))?;
    let (x, bias, out) = call_data(who, c)?;
    let w = input::<f32>(&c.t.w, &format!("{who}: w"))?;
    kernel(cfg, &x, &w, bias.as_deref(), out)
}

/// Parses and validates the packed `conv1d` arguments, then runs [`conv1d_forward`].
pub fn conv1d_packed(args: &[AnyView]) -> Result<()> {
    let call = parse_call(&interface::CONV1D, args, false, WeightKind::Torch)?;
    run_checked("conv1d", &call, false, conv1d_forward)
}

/// Parses and validates the packed `conv1d_transpose` arguments, then runs
/// [`conv1d_transpose_forward`].
pub fn conv1d_transpose_packed(args: &[AnyView]) -> Result<()> {
    let call = parse_call(&interface::CONV1D_TRANSPOSE, args, true, WeightKind::Torch)?;
    run_checked("conv1d_transpose", &call, true, conv1d_transpose_forward)
}

// ---------------------------------------------------------------------------
// Plain-Rust entry points.
// ---------------------------------------------------------------------------

/// Checks the dense buffers of either convolution against `cfg`; `w_dims` is
/// the weight shape, which differs between conv1d and conv1d_transpose.
#[allow(clippy::too_many_arguments)]
fn expect_buffers(
    who: &str,
    cfg: &Conv1dConfig,
    lout: usize,
    w_dims: &[usize],
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<()> {
    expect_len(
        &format!("{who}: x"),
        x.len(),
        &[cfg.batch, cfg.in_channels, cfg.length],
    )?;
    expect_len(&format!("{who}: w"), w.len(), w_dims)?;
    if let Some(b) = bias {
        expect_len(&format!("{who}: bias"), b.len(), &[cfg.out_channels])?;
    }
    expect_len(
        &format!("{who}: out"),
        out.len(),
        &[cfg.batch, cfg.out_channels, lout],
    )
}

/// `conv1d` on dense row-major buffers: `x` `[B, Cin, L]`, `w` `[Cout, Cin/g,
/// K]`, `bias` `[Cout]`, `out` `[B, Cout, Lout]`.
pub fn conv1d_forward(
    cfg: &Conv1dConfig,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "conv1d";
    cfg.check(WHO)?;
    let lout = match cfg.conv_out_len() {
        Some(n) => n,
        None => bail!(VALUE_ERROR, "conv1d: the output would be empty for {cfg:?}"),
    };
    let w_dims = [cfg.out_channels, cfg.in_channels / cfg.groups, cfg.kernel];
    expect_buffers(WHO, cfg, lout, &w_dims, x, w, bias, out)?;
    conv1d_run(cfg, lout, x, w, bias, out, TUNING).map_err(|e| internal(WHO, e))
}

fn conv1d_run(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let cin_g = cfg.in_channels / cfg.groups;
    let cout_g = cfg.out_channels / cfg.groups;
    // The GEMM's inner dimension is Cin/g * K here.
    if tuning
        .direct
        .unwrap_or(cout_g < 4 || cin_g * cfg.kernel < 8)
    {
        conv_direct(cfg, lout, x, w, bias, out);
        Ok(())
    } else {
        conv_tiles::<F32Gemm>(cfg, lout, x, w, bias, out, tuning.tile_bytes)
    }
}

/// `conv_transpose1d` on dense row-major buffers: `x` `[B, Cin, L]`, `w` `[Cin,
/// Cout/g, K]`, `bias` `[Cout]`, `out` `[B, Cout, Lout]`.
pub fn conv1d_transpose_forward(
    cfg: &Conv1dConfig,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "conv1d_transpose";
    cfg.check(WHO)?;
    let lout = match cfg.transpose_out_len() {
        Some(n) => n,
        None => bail!(
            VALUE_ERROR,
            "conv1d_transpose: the output would be empty for {cfg:?}"
        ),
    };
    let w_dims = [cfg.in_channels, cfg.out_channels / cfg.groups, cfg.kernel];
    expect_buffers(WHO, cfg, lout, &w_dims, x, w, bias, out)?;
    transpose_run(cfg, lout, x, w, bias, out, TUNING).map_err(|e| internal(WHO, e))
}

fn transpose_run(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let cin_g = cfg.in_channels / cfg.groups;
    let cout_g = cfg.out_channels / cfg.groups;
    // The GEMM's inner dimension is Cin/g here, its columns Cout/g * K: one
    // output channel of many taps (the inverse STFT's 22 -> 1, 20 taps) is a
    // GEMM of 20 columns, 17x faster than the scatter loop on one thread.
    if tuning
        .direct
        .unwrap_or(cin_g < 4 || cout_g * cfg.kernel < 8)
    {
        transpose_direct(cfg, lout, x, w, bias, out);
        Ok(())
    } else {
        transpose_tiles::<F32Gemm>(cfg, lout, x, w, bias, out, tuning)
    }
}
