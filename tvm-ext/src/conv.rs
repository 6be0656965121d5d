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
//!   Kokoro's `ConvTranspose1d(C, C, 3, stride 2, groups=C)`) run a direct loop
//!   per output row instead.
//!
//! [`conv1d_forward`] and [`conv1d_transpose_forward`] are the same kernels for
//! plain Rust callers.
use std::borrow::Cow;

use rayon::prelude::*;
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, TensorView, VALUE_ERROR};

use crate::gemm::{
    flag_arg, int_in, internal, overlaps, sgemm, sgemm_shared, span, tensor_arg, threads, JobError, Layout, Scratch,
    SharedMut,
};
use crate::tensor::{byte_span, check_dtype, expect_shape, input, output, shape_of, Bf16};

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
        let n = (self.length as i128 - 1) * self.stride as i128 - self.pad_left as i128 - self.pad_right as i128
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
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        conv1d_packed(args)?;
        Ok(Any::default())
    })
}

/// The registered `kokoro_tvm_ext.conv1d_transpose`.
pub fn transpose_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        conv1d_transpose_packed(args)?;
        Ok(Any::default())
    })
}

fn dim(v: i64) -> usize {
    // Tensor dimensions are never negative.
    v.max(0) as usize
}

/// The tensors of one call, parsed and type-checked.
pub(crate) struct Tensors {
    pub x: TensorView,
    pub w: TensorView,
    pub bias: Option<TensorView>,
    pub out: TensorView,
}

/// What a convolution call's `w` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeightKind {
    /// torch's float32 weights.
    Torch,
    /// bf16 weights packed by [`crate::bf16`].
    Bf16,
    /// float32 weights transformed by [`crate::winograd`].
    Winograd,
}

fn take_tensors(who: &str, args: &[AnyView], n_ints: usize, has_bias: bool, weights: WeightKind) -> Result<Tensors> {
    let expected = n_ints + 3 + has_bias as usize;
    ensure!(
        args.len() == expected,
        VALUE_ERROR,
        "{who}: expected {expected} arguments with has_bias={}, got {}",
        has_bias as i32,
        args.len()
    );
    let mut next = n_ints;
    let mut take = |name: &str| -> Result<TensorView> {
        let t = tensor_arg(args[next], &format!("{who}: {name}"))?;
        next += 1;
        Ok(t)
    };
    let x = take("x")?;
    let w = take("w")?;
    let bias = if has_bias { Some(take("bias")?) } else { None };
    let out = take("out")?;
    check_dtype::<f32>(&x, &format!("{who}: x"))?;
    if weights == WeightKind::Bf16 {
        check_dtype::<Bf16>(&w, &format!("{who}: w"))?;
    } else {
        check_dtype::<f32>(&w, &format!("{who}: w"))?;
    }
    if let Some(b) = &bias {
        check_dtype::<f32>(b, &format!("{who}: bias"))?;
    }
    check_dtype::<f32>(&out, &format!("{who}: out"))?;
    Ok(Tensors { x, w, bias, out })
}

fn expect_ints(who: &str, args: &[AnyView], n: usize, names: &str) -> Result<()> {
    ensure!(
        args.len() >= n,
        VALUE_ERROR,
        "{who}: expected at least {n} arguments ({names}), got {}",
        args.len()
    );
    Ok(())
}

/// One parsed call of either convolution: geometry, output length, tensors.
pub(crate) struct ConvCall {
    pub cfg: Conv1dConfig,
    pub lout: usize,
    pub t: Tensors,
}

/// Parses and validates the packed arguments of `conv1d` (or, with `transpose`,
/// `conv1d_transpose`). With packed weights (the bf16 and Winograd variants),
/// one more prim follows `has_bias`, the kernel size, and the caller checks
/// `w`'s shape; the output channels then come from `out`.
pub(crate) fn parse_call(who: &str, args: &[AnyView], transpose: bool, weights: WeightKind) -> Result<ConvCall> {
    let packed = weights != WeightKind::Torch;
    let mut names = vec!["stride", "pad_left", "pad_right"];
    if transpose {
        names.push("output_padding");
    }
    names.extend(["dilation", "groups", "has_bias"]);
    if packed {
        names.push("kernel_size");
    }
    expect_ints(who, args, names.len(), &names.join(", "))?;
    let at = |name: &str| names.iter().position(|n| *n == name).map(|i| args[i]);
    let int = |name: &str, lo: i64| int_in(at(name).unwrap(), &format!("{who}: {name}"), lo, MAX_PRIM);
    let stride = int("stride", 1)?;
    let pad_left = int("pad_left", 0)?;
    let pad_right = int("pad_right", 0)?;
    let output_padding = if transpose { int("output_padding", 0)? } else { 0 };
    let dilation = int("dilation", 1)?;
    let groups = int("groups", 1)?;
    let has_bias = flag_arg(at("has_bias").unwrap(), &format!("{who}: has_bias"))?;
    let kernel_size = if packed { Some(int("kernel_size", 1)?) } else { None };
    ensure!(
        !transpose || output_padding < stride.max(dilation),
        VALUE_ERROR,
        "{who}: output_padding: must be smaller than stride or dilation, got \
         output_padding={output_padding}, stride={stride}, dilation={dilation}"
    );
    let t = take_tensors(who, args, names.len(), has_bias, weights)?;
    let xs = shape_of(&t.x, &format!("{who}: x"), 3)?.to_vec();
    let (out_channels, kernel) = match kernel_size {
        Some(k) => (dim(shape_of(&t.out, &format!("{who}: out"), 3)?[1]), k as usize),
        None => {
            let ws = shape_of(&t.w, &format!("{who}: w"), 3)?;
            let cout = if transpose {
                dim(ws[1]).saturating_mul(groups as usize)
            } else {
                dim(ws[0])
            };
            (cout, dim(ws[2]))
        }
    };
    let cfg = Conv1dConfig {
        batch: dim(xs[0]),
        in_channels: dim(xs[1]),
        length: dim(xs[2]),
        out_channels,
        kernel,
        stride: stride as usize,
        pad_left: pad_left as usize,
        pad_right: pad_right as usize,
        dilation: dilation as usize,
        groups: groups as usize,
        output_padding: output_padding as usize,
    };
    cfg.check(who)?;
    let lout = if transpose {
        cfg.transpose_out_len()
    } else {
        cfg.conv_out_len()
    };
    let lout = match lout {
        Some(n) => n,
        None if transpose => bail!(
            VALUE_ERROR,
            "{who}: the output length (L-1)*stride - pad_left - pad_right + \
             dilation*(K-1) + output_padding + 1 = {} must be at least 1",
            (cfg.length as i128 - 1) * cfg.stride as i128 - cfg.pad_left as i128 - cfg.pad_right as i128
                + cfg.dilation as i128 * (cfg.kernel as i128 - 1)
                + cfg.output_padding as i128
                + 1
        ),
        None => bail!(
            VALUE_ERROR,
            "{who}: x: the padded length {} is shorter than the dilated kernel {}, so the output \
             would be empty",
            cfg.length as i128 + cfg.pad_left as i128 + cfg.pad_right as i128,
            cfg.dilation as i128 * (cfg.kernel as i128 - 1) + 1
        ),
    };
    Ok(ConvCall { cfg, lout, t })
}

/// The data of `x`, `bias` and `out` of a parsed call, after checking the shapes
/// of `bias` and `out` and that `out` overlaps none of the inputs (`w` too).
#[allow(clippy::type_complexity)]
pub(crate) fn call_data<'a>(
    who: &str,
    c: &ConvCall,
) -> Result<(Cow<'a, [f32]>, Option<Cow<'a, [f32]>>, &'a mut [f32])> {
    let (cfg, t) = (&c.cfg, &c.t);
    if let Some(b) = &t.bias {
        expect_shape(b, &format!("{who}: bias"), &[cfg.out_channels as i64])?;
    }
    expect_shape(
        &t.out,
        &format!("{who}: out"),
        &[cfg.batch as i64, cfg.out_channels as i64, c.lout as i64],
    )?;
    let x = input::<f32>(&t.x, &format!("{who}: x"))?;
    let bias = match &t.bias {
        Some(b) => Some(input::<f32>(b, &format!("{who}: bias"))?),
        None => None,
    };
    let out = output::<f32>(&t.out, &format!("{who}: out"))?;
    let o = span(out);
    ensure!(
        !overlaps(o, span(&x)),
        VALUE_ERROR,
        "{who}: out: output memory overlaps input x"
    );
    ensure!(
        !overlaps(o, byte_span(&t.w)),
        VALUE_ERROR,
        "{who}: out: output memory overlaps input w"
    );
    if let Some(b) = &bias {
        ensure!(
            !overlaps(o, span(b)),
            VALUE_ERROR,
            "{who}: out: output memory overlaps input bias"
        );
    }
    Ok((x, bias, out))
}

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
    const WHO: &str = "conv1d";
    run_checked(WHO, &parse_call(WHO, args, false, WeightKind::Torch)?, false, conv1d_forward)
}

/// Parses and validates the packed `conv1d_transpose` arguments, then runs
/// [`conv1d_transpose_forward`].
pub fn conv1d_transpose_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "conv1d_transpose";
    run_checked(
        WHO,
        &parse_call(WHO, args, true, WeightKind::Torch)?,
        true,
        conv1d_transpose_forward,
    )
}

// ---------------------------------------------------------------------------
// Plain-Rust entry points.
// ---------------------------------------------------------------------------

fn expect_len(who: &str, name: &str, len: usize, dims: &[usize]) -> Result<()> {
    let want = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    ensure!(
        want == Some(len),
        VALUE_ERROR,
        "{who}: {name}: expected {} elements (shape {:?}), got {len}",
        want.map_or("too many".to_string(), |n| n.to_string()),
        dims
    );
    Ok(())
}

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
    expect_len(who, "x", x.len(), &[cfg.batch, cfg.in_channels, cfg.length])?;
    expect_len(who, "w", w.len(), w_dims)?;
    if let Some(b) = bias {
        expect_len(who, "bias", b.len(), &[cfg.out_channels])?;
    }
    expect_len(who, "out", out.len(), &[cfg.batch, cfg.out_channels, lout])
}

/// `conv1d` on dense row-major buffers: `x` `[B, Cin, L]`, `w` `[Cout, Cin/g,
/// K]`, `bias` `[Cout]`, `out` `[B, Cout, Lout]`.
pub fn conv1d_forward(cfg: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) -> Result<()> {
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
    if tuning.direct.unwrap_or(cout_g < 4 || cin_g * cfg.kernel < 8) {
        conv_direct(cfg, lout, x, w, bias, out);
        Ok(())
    } else {
        conv_gemm(cfg, lout, x, w, bias, out, tuning.tile_bytes)
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
        None => bail!(VALUE_ERROR, "conv1d_transpose: the output would be empty for {cfg:?}"),
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
    // The GEMM's inner dimension is Cin/g here.
    if tuning.direct.unwrap_or(cout_g < 4 || cin_g < 4) {
        transpose_direct(cfg, lout, x, w, bias, out);
        Ok(())
    } else {
        transpose_gemm(cfg, lout, x, w, bias, out, tuning)
    }
}

// ---------------------------------------------------------------------------
// Shared pieces.
// ---------------------------------------------------------------------------

/// The `j` in `0..n` for which `j * s + off` lies in `0..limit`, as a range.
///
/// Runs once per im2col row, so it divides in i64 (an i128 division is a slow
/// library call): `off` is an offset into a buffer, far inside i64's range.
pub(crate) fn valid_range(n: usize, s: usize, off: i128, limit: usize) -> std::ops::Range<usize> {
    let (s, off, n) = (s as i64, off as i64, n as i64);
    let ceil_div = |a: i64| -> i64 {
        if s == 1 {
            a
        } else {
            a.div_euclid(s) + (a.rem_euclid(s) != 0) as i64
        }
    };
    let lo = ceil_div(-off).clamp(0, n);
    let hi = ceil_div(limit as i64 - off).clamp(lo, n);
    lo as usize..hi as usize
}

/// Knobs of the kernels; tests vary them to cover every path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Bytes of the column block (im2col or GEMM result) of one tile.
    pub tile_bytes: usize,
    /// Bytes of the weight block a transposed-convolution job keeps hot.
    pub weight_bytes: usize,
    /// Force the direct loop (`Some(true)`) or the GEMM (`Some(false)`).
    pub direct: Option<bool>,
}

/// About half of a 2 MiB L2 for the column block of a tile, and as much for
/// the weight block of a transposed-convolution job.
pub(crate) const TUNING: Tuning = Tuning {
    tile_bytes: 1 << 20,
    weight_bytes: 1 << 20,
    direct: None,
};

/// How the columns of each (batch item, group) are split into jobs.
pub(crate) struct Plan {
    /// Tile width in columns.
    pub tile: usize,
    /// Tiles per (batch item, group).
    pub tiles: usize,
    /// Jobs run one per thread (each GEMM single-threaded); otherwise the jobs
    /// run one after another and each GEMM uses the whole pool.
    pub job_parallel: bool,
}

impl Plan {
    /// `units` independent (batch, group) pairs of `width` columns each, with an
    /// im2col block of `rows` rows per column.
    pub fn new(units: usize, width: usize, rows: usize, tile_bytes: usize) -> Self {
        let threads = threads();
        let width = width.max(1);
        let widest = (tile_bytes / (4 * rows.max(1))).clamp(16, 1024);
        let mut tiles = width.div_ceil(widest);
        // Tiles narrower than this make the GEMM inefficient.
        let wide_enough = |t: usize| width / t >= 48;
        if threads > 1 {
            // At least two jobs per thread if possible, else one.
            for want in [2 * threads, threads] {
                let t = tiles.max(want.div_ceil(units));
                if t == tiles || wide_enough(t) {
                    tiles = t;
                    break;
                }
            }
            // A job count that the threads share evenly.
            let even = (units * tiles).div_ceil(threads) * threads;
            let t = even.div_ceil(units);
            if t != tiles && units * t == even && wide_enough(t) {
                tiles = t;
            }
        }
        let tile = width.div_ceil(tiles);
        let tiles = width.div_ceil(tile);
        let jobs = units * tiles;
        let job_parallel = threads > 1 && (jobs >= 2 * threads || jobs.is_multiple_of(threads));
        Self {
            tile,
            tiles,
            job_parallel,
        }
    }
}

/// Runs `job(index, scratch, gemm_parallel)` for every job index per `plan`.
pub(crate) fn run_jobs<F>(units: usize, plan: &Plan, job: F) -> std::result::Result<(), JobError>
where
    F: Fn(usize, &mut Scratch, bool) -> std::result::Result<(), JobError> + Sync,
{
    let jobs = units * plan.tiles;
    if plan.job_parallel {
        (0..jobs)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each_init(Scratch::new, |scratch, i| job(i, scratch, false))
    } else {
        let mut scratch = Scratch::new();
        (0..jobs).try_for_each(|i| job(i, &mut scratch, threads() > 1))
    }
}

/// Row `(c, tap)` of the im2col block of output columns `t0..t0 + dst.len()`:
/// `dst[j] = xrow[(t0 + j) * stride + tap * dilation - pad_left]`, zero where
/// that falls outside `xrow` (the padding).
pub(crate) fn im2col_row(cfg: &Conv1dConfig, xrow: &[f32], tap: usize, t0: usize, dst: &mut [f32]) {
    let tn = dst.len();
    let off = (t0 * cfg.stride) as i128 + (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
    let r = valid_range(tn, cfg.stride, off, xrow.len());
    // Zero padding; the buffer holds stale data.
    dst[..r.start].fill(0.0);
    dst[r.end..].fill(0.0);
    if r.is_empty() {
        return;
    }
    // In range, so `j * stride + off` is a valid index of `xrow`.
    let first = (r.start as i128 * cfg.stride as i128 + off) as usize;
    if cfg.stride == 1 {
        dst[r.clone()].copy_from_slice(&xrow[first..first + r.len()]);
    } else {
        for (d, s) in dst[r].iter_mut().zip(xrow[first..].iter().step_by(cfg.stride)) {
            *d = *s;
        }
    }
}

/// Sets columns `row0 + o * lout ..+ tn` of `out` to `bias[o]`, for every `o`
/// of the job's rows (nothing without a bias: the GEMM then overwrites).
pub(crate) fn fill_bias(
    bias: Option<&[f32]>,
    out: SharedMut,
    row0: usize,
    lout: usize,
    tn: usize,
) -> std::result::Result<(), JobError> {
    for (o, &v) in bias.unwrap_or(&[]).iter().enumerate() {
        // SAFETY: the calling job alone owns these columns of its rows.
        unsafe { out.slice(row0 + o * lout, tn)? }.fill(v);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// conv1d.
// ---------------------------------------------------------------------------

fn conv_gemm(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let kc = cin_g * k;
    let units = cfg.batch * g;
    let plan = Plan::new(units, lout, kc, tile_bytes);
    let out = SharedMut::new(out);
    run_jobs(units, &plan, |i, col, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (b, gi) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
        // im2col block, rows (c, tap), row-major [kc, tn].
        col.set_len(kc * tn);
        for (r, dst) in col.chunks_exact_mut(tn).enumerate() {
            let xrow = &x[(b * cin + gi * cin_g + r / k) * l..][..l];
            im2col_row(cfg, xrow, r % k, t0, dst);
        }
        let row0 = (b * cout + gi * cout_g) * lout + t0;
        fill_bias(bias.map(|bv| &bv[gi * cout_g..][..cout_g]), out, row0, lout, tn)?;
        // SAFETY: as above; rows of `out` do not alias (row stride lout >= tn).
        unsafe {
            sgemm_shared(
                cout_g,
                tn,
                kc,
                w,
                Layout::row_major(gi * cout_g * kc, kc),
                col,
                Layout::row_major(0, tn),
                out,
                Layout::row_major(row0, lout),
                bias.is_some(),
                parallel,
            )
        }
    })
}

/// Direct loop, one output row per task, for tiny groups.
fn conv_direct(cfg: &Conv1dConfig, lout: usize, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    out.par_chunks_mut(lout).enumerate().for_each(|(row, y)| {
        let (b, o) = (row / cout, row % cout);
        let gi = o / cout_g;
        y.fill(bias.map_or(0.0, |bv| bv[o]));
        for c in 0..cin_g {
            let xrow = &x[(b * cin + gi * cin_g + c) * l..][..l];
            for tap in 0..k {
                let wv = w[(o * cin_g + c) * k + tap];
                let off = (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
                let r = valid_range(lout, cfg.stride, off, l);
                if r.is_empty() {
                    continue;
                }
                let first = (r.start as i128 * cfg.stride as i128 + off) as usize;
                if cfg.stride == 1 {
                    for (yv, xv) in y[r.clone()].iter_mut().zip(&xrow[first..first + r.len()]) {
                        *yv += wv * xv;
                    }
                } else {
                    for (yv, xv) in y[r].iter_mut().zip(xrow[first..].iter().step_by(cfg.stride)) {
                        *yv += wv * xv;
                    }
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------
// conv1d_transpose.
// ---------------------------------------------------------------------------

/// Column formulation: per job a block of output channels, whose weights
/// `w[c, o0..o0+on, :]` (a `[Cin/g, on*K]` block of the natural layout) stay in
/// L2 while the job walks the input in tiles. Each tile is one GEMM
/// `cols[t, (o, k)] = sum_c x[c, t] * w[c, o, k]`, then every `(t, o)` adds its
/// K contiguous values to `out[o, t*stride - pad_left + k*dilation]`.
fn transpose_gemm(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let units = cfg.batch * g;
    let threads = threads();
    // Output channels per job: the weight block within ~1 MiB, and enough jobs.
    let mut ob = (tuning.weight_bytes / (4 * k * cin_g.max(1))).clamp(1, cout_g);
    if threads > 1 {
        let per_unit = (2 * threads).div_ceil(units);
        ob = ob.min(cout_g.div_ceil(per_unit).max(1));
    }
    let blocks = cout_g.div_ceil(ob);
    let jobs = units * blocks;
    let job_parallel = threads > 1 && jobs >= threads;
    // Input columns per tile: the column block [T, on*K] within the budget.
    let tile = (tuning.tile_bytes / (4 * ob * k)).clamp(16, l.max(16));
    let out = SharedMut::new(out);
    let job = |i: usize, cols: &mut Scratch, parallel: bool| -> std::result::Result<(), JobError> {
        let (unit, bi) = (i / blocks, i % blocks);
        let (b, gi) = (unit / g, unit % g);
        let o0 = bi * ob;
        let on = ob.min(cout_g - o0);
        let row0 = (b * cout + gi * cout_g + o0) * lout;
        // SAFETY: this job alone owns these `on` rows of `out`.
        let rows = unsafe { out.slice(row0, on * lout)? };
        for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
            row.fill(bias.map_or(0.0, |bv| bv[gi * cout_g + o0 + ol]));
        }
        let n = on * k;
        for t0 in (0..l).step_by(tile) {
            let tn = tile.min(l - t0);
            cols.set_len(tn * n);
            sgemm(
                tn,
                n,
                cin_g,
                x,
                Layout {
                    offset: (b * cin + gi * cin_g) * l + t0,
                    rs: 1,
                    cs: l,
                },
                w,
                Layout {
                    offset: gi * cin_g * cout_g * k + o0 * k,
                    rs: cout_g * k,
                    cs: 1,
                },
                cols,
                Layout::row_major(0, n),
                false,
                parallel,
            )?;
            col2im(cfg, lout, t0, tn, cols, n, 0, rows);
        }
        Ok(())
    };
    if job_parallel {
        (0..jobs)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each_init(Scratch::new, |c, i| job(i, c, false))
    } else {
        let mut c = Scratch::new();
        (0..jobs).try_for_each(|i| job(i, &mut c, threads > 1))
    }
}

/// Adds a tile of transposed-convolution columns into the job's output rows:
/// for input columns `t0..t0 + tn`, `cols[tt * ld + off + o * K + kk]` goes to
/// `rows[o][(t0 + tt) * stride - pad_left + kk * dilation]`, clipped to the
/// output (col2im). `rows` holds whole output rows of `lout`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn col2im(
    cfg: &Conv1dConfig,
    lout: usize,
    t0: usize,
    tn: usize,
    cols: &[f32],
    ld: usize,
    off: usize,
    rows: &mut [f32],
) {
    let (k, s, d) = (cfg.kernel, cfg.stride, cfg.dilation);
    for tt in 0..tn {
        let base = ((t0 + tt) * s) as i128 - cfg.pad_left as i128;
        // Taps kk with 0 <= base + kk*d < lout.
        let r = valid_range(k, d, base, lout);
        if r.is_empty() {
            continue;
        }
        let first = (base + (r.start * d) as i128) as usize;
        for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
            let src = &cols[tt * ld + off + ol * k..][..k][r.clone()];
            if d == 1 {
                for (y, v) in row[first..first + src.len()].iter_mut().zip(src) {
                    *y += v;
                }
            } else {
                for (y, v) in row[first..].iter_mut().step_by(d).zip(src) {
                    *y += v;
                }
            }
        }
    }
}

/// Direct scatter loop, one output row per task, for tiny groups (depthwise).
fn transpose_direct(cfg: &Conv1dConfig, lout: usize, x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let (g, k, l, s) = (cfg.groups, cfg.kernel, cfg.length, cfg.stride);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    out.par_chunks_mut(lout).enumerate().for_each(|(row, y)| {
        let (b, o) = (row / cout, row % cout);
        let (gi, ol) = (o / cout_g, o % cout_g);
        y.fill(bias.map_or(0.0, |bv| bv[o]));
        for c in 0..cin_g {
            let ci = gi * cin_g + c;
            let xrow = &x[(b * cin + ci) * l..][..l];
            let wrow = &w[(ci * cout_g + ol) * k..][..k];
            for (tap, &wv) in wrow.iter().enumerate() {
                // x[t] lands on p = t*s + off.
                let off = (tap * cfg.dilation) as i128 - cfg.pad_left as i128;
                let r = valid_range(l, s, off, lout);
                if r.is_empty() {
                    continue;
                }
                let first = (r.start as i128 * s as i128 + off) as usize;
                for (yv, xv) in y[first..].iter_mut().step_by(s).zip(&xrow[r]) {
                    *yv += wv * xv;
                }
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tensor::testing::{Owned, Rng};
    use tvm_ffi::TYPE_ERROR;

    /// (value, sum of |terms|) per output, straight from the definition.
    pub(crate) fn reference_conv(c: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<(f64, f64)> {
        let lout = c.conv_out_len().unwrap();
        let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
        let mut out = vec![(0.0, 0.0); c.batch * c.out_channels * lout];
        for b in 0..c.batch {
            for o in 0..c.out_channels {
                let g = o / cout_g;
                for t in 0..lout {
                    let mut acc = bias.map_or(0.0, |bv| bv[o] as f64);
                    let mut mag = acc.abs();
                    for ci in 0..cin_g {
                        for k in 0..c.kernel {
                            let pos = (t * c.stride + k * c.dilation) as i64 - c.pad_left as i64;
                            if pos < 0 || pos >= c.length as i64 {
                                continue;
                            }
                            let xv = x[(b * c.in_channels + g * cin_g + ci) * c.length + pos as usize] as f64;
                            let wv = w[(o * cin_g + ci) * c.kernel + k] as f64;
                            acc += xv * wv;
                            mag += (xv * wv).abs();
                        }
                    }
                    out[(b * c.out_channels + o) * lout + t] = (acc, mag);
                }
            }
        }
        out
    }

    fn reference_transpose(c: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<(f64, f64)> {
        let lout = c.transpose_out_len().unwrap();
        let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
        let mut out = vec![(0.0, 0.0); c.batch * c.out_channels * lout];
        for b in 0..c.batch {
            for o in 0..c.out_channels {
                let v = bias.map_or(0.0, |bv| bv[o] as f64);
                for t in 0..lout {
                    out[(b * c.out_channels + o) * lout + t] = (v, v.abs());
                }
            }
            for ci in 0..c.in_channels {
                let g = ci / cin_g;
                for ol in 0..cout_g {
                    let o = g * cout_g + ol;
                    for t in 0..c.length {
                        for k in 0..c.kernel {
                            let p = (t * c.stride + k * c.dilation) as i64 - c.pad_left as i64;
                            if p < 0 || p >= lout as i64 {
                                continue;
                            }
                            let xv = x[(b * c.in_channels + ci) * c.length + t] as f64;
                            let wv = w[(ci * cout_g + ol) * c.kernel + k] as f64;
                            let e = &mut out[(b * c.out_channels + o) * lout + p as usize];
                            e.0 += xv * wv;
                            e.1 += (xv * wv).abs();
                        }
                    }
                }
            }
        }
        out
    }

    fn assert_close(what: &str, got: &[f32], want: &[(f64, f64)]) {
        assert_close_to(what, got, want, 1e-4)
    }

    /// Each output within `rel * (1 + sum of |terms|)` of the reference.
    pub(crate) fn assert_close_to(what: &str, got: &[f32], want: &[(f64, f64)], rel: f64) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (g, (v, mag))) in got.iter().zip(want).enumerate() {
            let tol = rel * (1.0 + mag);
            assert!(
                (*g as f64 - v).abs() <= tol,
                "{what}: element {i}: got {g}, want {v} (tol {tol})"
            );
        }
    }

    /// (batch, cin, cout, length, kernel, stride, pad_left, pad_right, dilation, groups,
    /// output_padding, has_bias, strided x)
    type Case = (
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        usize,
        bool,
        bool,
    );

    fn config(c: &Case) -> Conv1dConfig {
        let &(batch, cin, cout, length, kernel, stride, pad_left, pad_right, dilation, groups, op, _, _) = c;
        Conv1dConfig {
            batch,
            in_channels: cin,
            out_channels: cout,
            length,
            kernel,
            stride,
            pad_left,
            pad_right,
            dilation,
            groups,
            output_padding: op,
        }
    }

    /// `x` as TVM could hand it over: dense, or stored `[B, L, Cin]` and viewed
    /// transposed, one element into its buffer.
    fn x_tensor(c: &Conv1dConfig, x: &[f32], strided: bool) -> Owned<f32> {
        let shape = [c.batch as i64, c.in_channels as i64, c.length as i64];
        if !strided {
            return Owned::new(x.to_vec(), &shape);
        }
        let (ci, l) = (c.in_channels, c.length);
        let mut store = vec![f32::NAN; 1 + x.len()];
        for b in 0..c.batch {
            for ch in 0..ci {
                for t in 0..l {
                    store[1 + (b * l + t) * ci + ch] = x[(b * ci + ch) * l + t];
                }
            }
        }
        Owned::strided(store, &shape, &[(l * ci) as i64, 1, ci as i64], 4)
    }

    fn call(transpose: bool, c: &Conv1dConfig, x: &[f32], w: &[f32], bias: Option<&[f32]>, strided: bool) -> Vec<f32> {
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        }
        .unwrap();
        let w_shape = if transpose {
            [c.in_channels, c.out_channels / c.groups, c.kernel]
        } else {
            [c.out_channels, c.in_channels / c.groups, c.kernel]
        };
        let mut ints = vec![c.stride as i64, c.pad_left as i64, c.pad_right as i64];
        if transpose {
            ints.push(c.output_padding as i64);
        }
        ints.extend([c.dilation as i64, c.groups as i64, bias.is_some() as i64]);
        let mut xt = x_tensor(c, x, strided);
        let mut wt = Owned::new(w.to_vec(), &w_shape.map(|d| d as i64));
        let mut bt = bias.map(|b| Owned::new(b.to_vec(), &[b.len() as i64]));
        let mut ot = Owned::new(
            vec![f32::NAN; c.batch * c.out_channels * lout],
            &[c.batch as i64, c.out_channels as i64, lout as i64],
        );
        let mut views = vec![xt.view(), wt.view()];
        if let Some(b) = bt.as_mut() {
            views.push(b.view());
        }
        views.push(ot.view());
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        let f = if transpose { transpose_function() } else { function() };
        f.call_packed(&args)
            .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
        drop(views);
        ot.data
    }

    fn check(transpose: bool, case: &Case) {
        let c = config(case);
        let (has_bias, strided) = (case.11, case.12);
        let mut rng = Rng(0x5eed ^ (c.in_channels * 131 + c.length * 7 + c.kernel) as u64);
        let x = rng.vec(c.batch * c.in_channels * c.length);
        let w_len = c.in_channels / c.groups * c.out_channels * c.kernel;
        let w = rng.vec(w_len);
        let bias = if has_bias { Some(rng.vec(c.out_channels)) } else { None };
        let (want, lout) = if transpose {
            (
                reference_transpose(&c, &x, &w, bias.as_deref()),
                c.transpose_out_len().unwrap(),
            )
        } else {
            (reference_conv(&c, &x, &w, bias.as_deref()), c.conv_out_len().unwrap())
        };
        let got = call(transpose, &c, &x, &w, bias.as_deref(), strided);
        assert_close(&format!("{c:?} (packed)"), &got, &want);
        // Every path, with tiles small enough to split any case.
        for tuning in [
            Tuning {
                tile_bytes: 1024,
                weight_bytes: 256,
                direct: Some(false),
            },
            Tuning {
                tile_bytes: 1 << 20,
                weight_bytes: 1 << 20,
                direct: Some(false),
            },
            Tuning {
                tile_bytes: 1024,
                weight_bytes: 256,
                direct: Some(true),
            },
        ] {
            let mut out = vec![f32::NAN; want.len()];
            let r = if transpose {
                transpose_run(&c, lout, &x, &w, bias.as_deref(), &mut out, tuning)
            } else {
                conv1d_run(&c, lout, &x, &w, bias.as_deref(), &mut out, tuning)
            };
            r.unwrap();
            assert_close(&format!("{c:?} {tuning:?}"), &out, &want);
        }
    }

    #[test]
    fn conv1d_matches_reference() {
        let cases: &[Case] = &[
            // b, cin, cout, l, k, s, pl, pr, d, g, op, bias, strided
            (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false, false),
            (2, 3, 5, 17, 3, 1, 1, 1, 1, 1, 0, true, false),
            (1, 20, 36, 50, 7, 1, 9, 9, 3, 1, 0, true, true),
            (2, 12, 18, 33, 5, 2, 3, 1, 2, 3, 0, true, false),
            (1, 8, 8, 40, 3, 1, 1, 1, 1, 8, 0, true, true),
            (1, 4, 8, 25, 3, 1, 0, 2, 1, 2, 0, false, false),
            (3, 17, 19, 1, 1, 1, 0, 0, 1, 1, 0, true, false),
            (1, 16, 18, 300, 11, 1, 25, 25, 5, 1, 0, true, false),
            (1, 6, 4, 10, 4, 3, 0, 0, 1, 1, 0, true, true),
            (1, 5, 7, 9, 3, 1, 4, 4, 2, 1, 0, true, false),
            (2, 10, 10, 3, 5, 1, 2, 2, 1, 1, 0, false, false),
            (1, 22, 24, 61, 12, 6, 4, 3, 1, 1, 0, true, false),
            (2, 9, 6, 30, 1, 1, 0, 0, 1, 3, 0, false, true),
        ];
        for case in cases {
            check(false, case);
        }
    }

    #[test]
    fn conv1d_transpose_matches_reference() {
        let cases: &[Case] = &[
            // b, cin, cout, l, k, s, pl, pr, d, g, op, bias, strided
            (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false, false),
            (1, 12, 10, 20, 20, 10, 5, 5, 1, 1, 0, true, false),
            (2, 9, 6, 15, 12, 6, 3, 3, 1, 1, 0, true, true),
            (1, 8, 8, 13, 3, 2, 1, 1, 1, 8, 1, true, false),
            (1, 6, 9, 11, 5, 2, 2, 0, 3, 3, 1, true, false),
            (2, 10, 12, 7, 3, 4, 0, 0, 1, 2, 3, false, true),
            (1, 5, 7, 1, 4, 3, 1, 2, 1, 1, 0, true, false),
            (1, 16, 20, 40, 4, 1, 1, 2, 2, 1, 1, true, false),
            (1, 7, 4, 9, 6, 3, 0, 4, 2, 1, 2, false, false),
            (1, 24, 20, 150, 8, 4, 2, 2, 1, 1, 0, true, false),
            (1, 4, 4, 5, 1, 1, 0, 0, 1, 1, 0, true, false),
            (3, 6, 3, 4, 3, 5, 0, 1, 1, 3, 2, true, true),
        ];
        for case in cases {
            check(true, case);
        }
    }

    fn args_of<'a>(ints: &'a [i64], views: &'a [TensorView]) -> Vec<AnyView<'a>> {
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        args
    }

    fn message(r: Result<Any>, kind: tvm_ffi::ErrorKind, want: &str) {
        match r {
            Ok(_) => panic!("the call should fail with {want:?}"),
            Err(e) => {
                assert_eq!(e.kind(), kind, "{}", e.message());
                assert!(
                    e.message().contains(want),
                    "{:?} does not contain {want:?}",
                    e.message()
                );
            }
        }
    }

    fn f32s(shape: &[i64]) -> Owned<f32> {
        Owned::new(vec![0.5; shape.iter().product::<i64>() as usize], shape)
    }

    #[test]
    fn valid_range_matches_a_scan() {
        for n in [0usize, 1, 5, 17] {
            for s in [1usize, 2, 3, 7] {
                for off in -40i128..40 {
                    for limit in [0usize, 1, 9, 30] {
                        let want: Vec<usize> =
                            (0..n).filter(|&j| (0..limit as i128).contains(&(j as i128 * s as i128 + off))).collect();
                        let got: Vec<usize> = valid_range(n, s, off, limit).collect();
                        assert_eq!(got, want, "n={n} s={s} off={off} limit={limit}");
                    }
                }
            }
        }
    }

    #[test]
    fn conv1d_rejects_bad_arguments() {
        let f = function();
        let good = [1i64, 1, 1, 1, 1, 1];
        let run = |ints: &[i64], shapes: &[&[i64]]| {
            let mut ts: Vec<Owned<f32>> = shapes.iter().map(|s| f32s(s)).collect();
            let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
            f.call_packed(&args_of(ints, &views))
        };
        let ok: [&[i64]; 4] = [&[1, 3, 8], &[4, 3, 3], &[4], &[1, 4, 8]];
        run(&good, &ok).unwrap();
        message(
            run(&good[..3], &[]),
            VALUE_ERROR,
            "conv1d: expected at least 6 arguments",
        );
        message(
            run(&good, &ok[..3]),
            VALUE_ERROR,
            "conv1d: expected 10 arguments with has_bias=1, got 9",
        );
        message(
            run(&[0, 1, 1, 1, 1, 1], &ok),
            VALUE_ERROR,
            "conv1d: stride: expected a value in [1, 2147483647], got 0",
        );
        message(
            run(&[1, -1, 1, 1, 1, 1], &ok),
            VALUE_ERROR,
            "conv1d: pad_left: expected a value in [0,",
        );
        message(
            run(&[1, 1, 1, 0, 1, 1], &ok),
            VALUE_ERROR,
            "conv1d: dilation: expected a value in [1,",
        );
        message(
            run(&[1, 1, 1, 1, 1, 2], &ok),
            VALUE_ERROR,
            "conv1d: has_bias: expected 0 or 1, got 2",
        );
        message(
            run(&[1, 1, 1, 1, 2, 1], &ok),
            VALUE_ERROR,
            "conv1d: groups: 2 does not divide the 3 input channels of x",
        );
        message(
            run(&[1, 1, 1, 1, 3, 1], &[&[1, 3, 8], &[4, 1, 3], &[4], &[1, 4, 8]]),
            VALUE_ERROR,
            "conv1d: groups: 3 does not divide the 4 output channels",
        );
        message(
            run(&good, &[&[3, 8], &[4, 3, 3], &[4], &[1, 4, 8]]),
            VALUE_ERROR,
            "conv1d: x: expected rank 3, got rank 2",
        );
        message(
            run(&good, &[&[1, 3, 8], &[4, 2, 3], &[4], &[1, 4, 8]]),
            VALUE_ERROR,
            "conv1d: w: expected shape [4, 3, 3], got [4, 2, 3]",
        );
        message(
            run(&good, &[&[1, 3, 8], &[4, 3, 0], &[4], &[1, 4, 8]]),
            VALUE_ERROR,
            "conv1d: w: the kernel size must be at least 1",
        );
        message(
            run(&good, &[&[1, 3, 8], &[4, 3, 3], &[5], &[1, 4, 8]]),
            VALUE_ERROR,
            "conv1d: bias: expected shape [4], got [5]",
        );
        message(
            run(&good, &[&[1, 3, 8], &[4, 3, 3], &[4], &[1, 4, 9]]),
            VALUE_ERROR,
            "conv1d: out: expected shape [1, 4, 8], got [1, 4, 9]",
        );
        message(
            run(&[1, 0, 0, 1, 1, 1], &[&[1, 3, 2], &[4, 3, 3], &[4], &[1, 4, 1]]),
            VALUE_ERROR,
            "conv1d: x: the padded length 2 is shorter than the dilated kernel 3",
        );

        // Wrong dtype, a non-tensor, a strided or aliasing output.
        let mut x = Owned::new(vec![1i64; 24], &[1, 3, 8]);
        let mut w = f32s(&[4, 3, 3]);
        let mut o = f32s(&[1, 4, 8]);
        let views = [x.view(), w.view(), o.view()];
        let ints = [1i64, 1, 1, 1, 1, 0];
        message(
            f.call_packed(&args_of(&ints, &views)),
            TYPE_ERROR,
            "conv1d: x: expected dtype float32, got int64",
        );
        let mut args = args_of(&ints, &views);
        args[6] = AnyView::from(&ints[0]);
        message(f.call_packed(&args), TYPE_ERROR, "conv1d: x: expected a tensor");
        let mut x = f32s(&[1, 3, 8]);
        let mut so = Owned::strided(vec![0.0f32; 32], &[1, 4, 8], &[32, 1, 4], 0);
        let views = [x.view(), w.view(), so.view()];
        message(
            f.call_packed(&args_of(&ints, &views)),
            VALUE_ERROR,
            "conv1d: out: output tensors must be contiguous",
        );
        let mut sq = f32s(&[1, 4, 8]);
        let mut w4 = f32s(&[4, 4, 3]);
        let v = sq.view();
        let views = [v, w4.view(), sq.view()];
        message(
            f.call_packed(&args_of(&ints, &views)),
            VALUE_ERROR,
            "conv1d: out: output memory overlaps input x",
        );
    }

    #[test]
    fn conv1d_transpose_rejects_bad_arguments() {
        let f = transpose_function();
        let run = |ints: &[i64], shapes: &[&[i64]]| {
            let mut ts: Vec<Owned<f32>> = shapes.iter().map(|s| f32s(s)).collect();
            let views: Vec<TensorView> = ts.iter_mut().map(|t| t.view()).collect();
            f.call_packed(&args_of(ints, &views))
        };
        // L=5, s=2, K=3, p=1, op=1: Lout = 4*2 - 2 + 2 + 1 + 1 = 10.
        let good = [2i64, 1, 1, 1, 1, 1, 1];
        let ok: [&[i64]; 4] = [&[1, 4, 5], &[4, 3, 3], &[3], &[1, 3, 10]];
        run(&good, &ok).unwrap();
        message(
            run(&good[..6], &[]),
            VALUE_ERROR,
            "conv1d_transpose: expected at least 7 arguments",
        );
        message(
            run(&good, &ok[..3]),
            VALUE_ERROR,
            "conv1d_transpose: expected 11 arguments with has_bias=1, got 10",
        );
        message(
            run(&[2, 1, 1, 2, 1, 1, 1], &ok),
            VALUE_ERROR,
            "conv1d_transpose: output_padding: must be smaller than stride or dilation",
        );
        message(
            run(&[2, 1, 1, 1, 1, 0, 1], &ok),
            VALUE_ERROR,
            "conv1d_transpose: groups: expected a value in [1,",
        );
        message(
            run(&[2, 1, 1, 1, 1, 3, 1], &ok),
            VALUE_ERROR,
            "conv1d_transpose: groups: 3 does not divide the 4 input channels of x",
        );
        message(
            run(&good, &[&[1, 4, 5], &[3, 3, 3], &[3], &[1, 3, 10]]),
            VALUE_ERROR,
            "conv1d_transpose: w: expected shape [4, 3, 3], got [3, 3, 3]",
        );
        message(
            run(&good, &[&[1, 4, 5], &[4, 3, 3], &[3], &[1, 3, 11]]),
            VALUE_ERROR,
            "conv1d_transpose: out: expected shape [1, 3, 10], got [1, 3, 11]",
        );
        message(
            run(&good, &[&[1, 4, 5], &[4, 3, 3], &[4], &[1, 3, 10]]),
            VALUE_ERROR,
            "conv1d_transpose: bias: expected shape [3], got [4]",
        );
        message(
            run(&[1, 3, 3, 0, 1, 1, 0], &[&[1, 4, 2], &[4, 3, 3], &[1, 3, 1]]),
            VALUE_ERROR,
            "conv1d_transpose: the output length (L-1)*stride - pad_left - pad_right + dilation*(K-1) + output_padding + 1 = -2 must be at least 1",
        );
    }

    #[test]
    fn plain_entry_points_check_lengths() {
        let c = config(&(1, 2, 2, 4, 3, 1, 1, 1, 1, 1, 0, false, false));
        let mut out = vec![0.0f32; 8];
        let err = conv1d_forward(&c, &[0.0; 7], &[0.0; 12], None, &mut out).unwrap_err();
        assert!(
            err.message().contains("conv1d: x: expected 8 elements"),
            "{}",
            err.message()
        );
        let err = conv1d_transpose_forward(&c, &[0.0; 8], &[0.0; 12], Some(&[0.0; 3]), &mut out).unwrap_err();
        assert!(
            err.message().contains("conv1d_transpose: bias: expected 2 elements"),
            "{}",
            err.message()
        );
    }

    /// `cargo test --release -p tvm-ext bench_conv -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_conv() {
        let reps_for = |flops: f64| ((2e10 / flops) as usize).clamp(2, 200);
        let conv: &[(usize, usize, usize, usize, usize)] = &[
            (128, 128, 7, 3, 19200),
            (256, 256, 11, 5, 3200),
            (512, 512, 3, 1, 320),
            (128, 128, 3, 1, 19200),
            (512, 512, 7, 1, 320),
        ];
        for &(cin, cout, k, d, l) in conv {
            let p = d * (k - 1) / 2;
            let c = config(&(1, cin, cout, l, k, 1, p, p, d, 1, 0, true, false));
            let lout = c.conv_out_len().unwrap();
            let mut rng = Rng(1);
            let (x, w, b) = (rng.vec(cin * l), rng.vec(cout * cin * k), rng.vec(cout));
            let mut out = vec![0.0f32; cout * lout];
            let flops = 2.0 * (cin * cout * k * lout) as f64;
            let reps = reps_for(flops);
            conv1d_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    conv1d_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            println!(
                "conv1d {cin}->{cout} k{k} d{d} L{l}: {:.3} ms {:.1} GFLOP/s",
                best * 1e3,
                flops / best / 1e9
            );
        }
        // cin, cout, k, stride, pad, output_padding, groups, length
        type Tr = (usize, usize, usize, usize, usize, usize, usize, usize);
        let tr: &[Tr] = &[
            (512, 256, 20, 10, 5, 0, 1, 320),
            (512, 256, 20, 10, 5, 0, 1, 100),
            (256, 128, 12, 6, 3, 0, 1, 3200),
            (1090, 1090, 3, 2, 1, 1, 1090, 160),
            (512, 512, 3, 2, 1, 1, 512, 3200),
        ];
        for &(cin, cout, k, s, p, op, g, l) in tr {
            let c = config(&(1, cin, cout, l, k, s, p, p, 1, g, op, true, false));
            let lout = c.transpose_out_len().unwrap();
            let mut rng = Rng(2);
            let (x, w, b) = (rng.vec(cin * l), rng.vec(cin * cout / g * k), rng.vec(cout));
            let mut out = vec![0.0f32; cout * lout];
            let flops = 2.0 * (cin * cout / g * k * l) as f64;
            let reps = reps_for(flops);
            conv1d_transpose_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                for _ in 0..reps {
                    conv1d_transpose_forward(&c, &x, &w, Some(&b), &mut out).unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            println!(
                "convT {cin}->{cout} k{k} s{s} g{g} L{l}: {:.3} ms {:.1} GFLOP/s",
                best * 1e3,
                flops / best / 1e9
            );
        }
    }
}
