//! Fused AdaIN: instance norm, its affine, the style affine and an activation in
//! one pass per row, as in Kokoro's `AdaIN1d` followed by Snake (vocoder
//! `AdaINResBlock1`) or by leaky_relu (`AdainResBlk1d`, F0/N predictor and
//! decoder). Unfused, TVM runs this as reductions plus an element-wise kernel
//! that calls scalar libm `sinf`: a third of the audio stage.
//!
//! Global name: `kokoro_tvm_ext.adain`, destination-passing, called packed because
//! the argument count depends on the flags (prims first, then tensors):
//!
//! ```text
//! kokoro_tvm_ext.adain(
//!   act: int              0 none, 1 snake, 2 leaky_relu
//!   has_norm_affine: 0/1  whether the instance norm has weight and bias
//!   eps: float >= 0       the instance norm's epsilon
//!   slope: float          leaky_relu's negative slope (read only if act == 2)
//!   x:      float32 [B, C, L]   (any strides)
//!   norm_w: float32 [C]         -- only if has_norm_affine
//!   norm_b: float32 [C]         -- only if has_norm_affine
//!   scale:  float32 [B, C, 1]   (AdaIN's 1 + gamma)
//!   shift:  float32 [B, C, 1]   (AdaIN's beta)
//!   alpha:  float32 [1, C, 1]   -- only if act == 1, non-zero
//!   OUT out: float32 [B, C, L]  (contiguous, sharing no memory with the inputs)
//! )
//! ```
//!
//! Per row `(b, c)`, with `mean` and the biased variance `var` of `x[b, c, :]`:
//! `n = (x - mean) / sqrt(var + eps) * norm_w[c] + norm_b[c]`,
//! `y = scale[b, c] * n + shift[b, c]`, and `out` is `y`, Snake's
//! `y + sin(alpha[c] * y)^2 / alpha[c]`, or `y > 0 ? y : slope * y`.
//!
//! How: the row statistics accumulate in f64 around the row's first element
//! (no cancellation however large the mean), and the per-row constants fold into
//! `out = (x - mean) * A + B` before the activation. The element-wise pass is one
//! branch-free loop that LLVM vectorizes, Snake's sine included ([`crate::sin`]'s
//! fast path; the rare element beyond its range is redone by the exact slow
//! path); the f64 sums are written with intrinsics. AVX-512 or AVX2+FMA code
//! (`x86.rs`) or NEON code (`arm.rs`) is chosen at run time, a portable build
//! otherwise. Rows run in parallel on
//! rayon's global pool; a row of `x` that is not contiguous along `L` is
//! gathered first.
use rayon::prelude::*;
use tvm_ffi::{bail, ensure, AnyView, Function, Result, TensorView, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::interface;
use crate::isa::Isa;
use crate::sin::{needs_slow_path, sin_fast, sin_slow};
use crate::tensor::{byte_span, check_dtype, expect_shape, input, output, shape_of, strided_input};

/// The activation after the affine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    None,
    /// `y + sin(alpha * y)^2 / alpha`, alpha per channel.
    Snake,
    /// `y > 0 ? y : slope * y`.
    LeakyRelu(f32),
}

/// The registered function.
pub fn function() -> Function {
    dps_function(adain_packed)
}

/// Parses and validates the packed arguments, then runs the kernel.
pub fn adain_packed(args: &[AnyView]) -> Result<()> {
    let mut c = Cursor::new(&interface::ADAIN, args)?;
    let act = c.int_in("act", 0, 2)?;
    let affine = c.flag("has_norm_affine")?;
    let eps = c.float("eps")?;
    ensure!(
        eps.is_finite() && eps >= 0.0,
        VALUE_ERROR,
        "adain: eps: expected a finite value >= 0, got {eps}"
    );
    // Always passed; only leaky_relu reads it.
    let slope = c.float("slope")?;
    let activation = match act {
        0 => Activation::None,
        1 => Activation::Snake,
        _ => {
            ensure!(
                slope.is_finite(),
                VALUE_ERROR,
                "adain: slope: expected a finite value, got {slope}"
            );
            Activation::LeakyRelu(slope as f32)
        }
    };
    let x = c.tensor("x")?;
    let norm_w = c.optional_tensor("norm_w")?;
    let norm_b = c.optional_tensor("norm_b")?;
    let scale = c.tensor("scale")?;
    let shift = c.tensor("shift")?;
    let alpha = c.optional_tensor("alpha")?;
    let out = c.output("out")?;
    c.finish()?;
    let norm = norm_w.as_ref().zip(norm_b.as_ref());
    debug_assert_eq!(norm.is_some(), affine);
    adain(
        &x,
        norm,
        &scale,
        &shift,
        alpha.as_ref(),
        eps,
        activation,
        &out,
    )
}

/// Validates tensor dtypes and shapes and runs the kernel; `alpha` is read for
/// [`Activation::Snake`] only.
#[allow(clippy::too_many_arguments)]
pub fn adain(
    x: &TensorView,
    norm: Option<(&TensorView, &TensorView)>,
    scale: &TensorView,
    shift: &TensorView,
    alpha: Option<&TensorView>,
    eps: f64,
    activation: Activation,
    out: &TensorView,
) -> Result<()> {
    check_dtype::<f32>(x, "adain: x")?;
    let shape = shape_of(x, "adain: x", 3)?.to_vec();
    let (batch, channels, length) = (shape[0], shape[1], shape[2]);
    crate::counters::note(|| {
        let class = match activation {
            Activation::Snake => "AdaIN (instance norm + affine) + Snake",
            _ => "AdaIN (instance norm + affine)",
        };
        crate::counters::elementwise_work(class, (batch * channels * length) as u64, 6)
    });
    if let Some((w, b)) = norm {
        expect_shape(w, "adain: norm_w", &[channels])?;
        expect_shape(b, "adain: norm_b", &[channels])?;
    }
    expect_shape(scale, "adain: scale", &[batch, channels, 1])?;
    expect_shape(shift, "adain: shift", &[batch, channels, 1])?;
    let alpha = match (activation, alpha) {
        (Activation::Snake, Some(a)) => {
            expect_shape(a, "adain: alpha", &[1, channels, 1])?;
            Some(a)
        }
        (Activation::Snake, None) => bail!(VALUE_ERROR, "adain: snake needs alpha"),
        _ => None,
    };
    expect_shape(out, "adain: out", &shape)?;

    let xs = strided_input::<f32>(x, "adain: x")?;
    let (ws, bs) = match norm {
        Some((w, b)) => (
            Some(input::<f32>(w, "adain: norm_w")?),
            Some(input::<f32>(b, "adain: norm_b")?),
        ),
        None => (None, None),
    };
    let scales = input::<f32>(scale, "adain: scale")?;
    let shifts = input::<f32>(shift, "adain: shift")?;
    let alphas = match alpha {
        Some(a) => Some(input::<f32>(a, "adain: alpha")?),
        None => None,
    };
    if let Some(a) = &alphas {
        ensure!(
            a.iter().all(|v| *v != 0.0),
            VALUE_ERROR,
            "adain: alpha must be non-zero in every channel"
        );
    }
    let ys = output::<f32>(out, "adain: out")?;
    let mut ins = vec![
        ("x", byte_span(x)),
        ("scale", byte_span(scale)),
        ("shift", byte_span(shift)),
    ];
    if let Some((w, b)) = norm {
        ins.extend([("norm_w", byte_span(w)), ("norm_b", byte_span(b))]);
    }
    ins.extend(alpha.map(|a| ("alpha", byte_span(a))));
    no_overlap("adain", &[("out", span(ys))], &ins)?;
    if ys.is_empty() {
        return Ok(());
    }

    let (channels, length) = (channels as usize, length as usize);
    let (sb, sc, sl) = (xs.strides[0], xs.strides[1], xs.strides[2]);
    let isa = Isa::best();
    // Rows of at least ~16k elements per task: short rows are batched.
    let min_rows = (1 << 14) / length + 1;
    ys.par_chunks_mut(length)
        .with_min_len(min_rows)
        .enumerate()
        .for_each(|(row, y)| {
            let (b, c) = (row / channels, row % channels);
            let base = b * sb + c * sc;
            let gathered: Vec<f32>;
            let xr: &[f32] = if sl == 1 || length == 1 {
                &xs.data[base..base + length]
            } else {
                gathered = (0..length).map(|l| xs.data[base + l * sl]).collect();
                &gathered
            };
            let p = RowParams {
                w: ws.as_ref().map_or(1.0, |w| w[c]),
                b: bs.as_ref().map_or(0.0, |b| b[c]),
                scale: scales[row],
                shift: shifts[row],
                alpha: alphas.as_ref().map_or(1.0, |a| a[c]),
                eps,
            };
            run_row(isa, xr, y, &p, activation);
        });
    Ok(())
}

/// What one row needs besides its data.
struct RowParams {
    w: f32,
    b: f32,
    scale: f32,
    shift: f32,
    alpha: f32,
    eps: f64,
}

fn run_row(isa: Isa, x: &[f32], y: &mut [f32], p: &RowParams, act: Activation) {
    match isa {
        // SAFETY: the features were detected at run time.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Avx512Bf16 | Isa::AmxInt8 | Isa::AmxBf16 => unsafe {
            x86::row_avx512(x, y, p, act)
        },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::row_avx2(x, y, p, act) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => unsafe {
            arm::row_neon(x, y, p, act)
        },
        Isa::Portable => row(x, y, p, act, shifted_sums),
    }
}

/// `(sum(x - k), sum((x - k)^2))` in f64, one element at a time.
#[inline(always)]
fn shifted_sums(x: &[f32], k: f64) -> (f64, f64) {
    let (mut s, mut q) = (0.0, 0.0);
    for v in x {
        let d = *v as f64 - k;
        s += d;
        q += d * d;
    }
    (s, q)
}

/// One row: statistics (through `sums`), then the fused affine and activation.
#[inline(always)]
fn row(
    x: &[f32],
    y: &mut [f32],
    p: &RowParams,
    act: Activation,
    sums: impl Fn(&[f32], f64) -> (f64, f64),
) {
    // Shifting by x[0] keeps the f64 sums free of cancellation whatever the mean.
    let k = x[0] as f64;
    let (s, q) = sums(x, k);
    let n = x.len() as f64;
    let d = s / n;
    let mean = k + d;
    let var = (q / n - d * d).max(0.0);
    let rstd = 1.0 / (var + p.eps).sqrt();
    // out = ((x - mean) * rstd * w + b) * scale + shift = (x - m) * a + c, with
    // m = mean rounded to f32 and its rounding error moved into c.
    let m = mean as f32;
    let wr = rstd * p.w as f64;
    let a = (wr * p.scale as f64) as f32;
    let c = ((p.b as f64 - (mean - m as f64) * wr) * p.scale as f64 + p.shift as f64) as f32;
    match act {
        Activation::None => affine_row(x, y, m, a, c, |v| v),
        Activation::LeakyRelu(slope) => {
            affine_row(x, y, m, a, c, |v| if v > 0.0 { v } else { v * slope })
        }
        Activation::Snake => snake_row(x, y, m, a, c, p.alpha),
    }
}

/// `y = f((x - m) * a + c)` for a branch-free `f`: one loop LLVM vectorizes.
#[inline(always)]
fn affine_row(x: &[f32], y: &mut [f32], m: f32, a: f32, c: f32, f: impl Fn(f32) -> f32) {
    for (o, v) in y.iter_mut().zip(x) {
        *o = f((v - m) * a + c);
    }
}

/// Snake after the affine: `v + sin(alpha v)^2 / alpha`, `v = (x - m) * a + c`.
#[inline(always)]
fn snake_row(x: &[f32], y: &mut [f32], m: f32, a: f32, c: f32, alpha: f32) {
    let inv = 1.0 / alpha;
    // Vectorized with the fast sine; `slow` (an OR over lanes) notes whether any
    // argument was beyond its range, which a second pass then redoes exactly.
    let mut slow = false;
    for (o, v) in y.iter_mut().zip(x) {
        let v = (v - m) * a + c;
        let t = alpha * v;
        slow |= needs_slow_path(t);
        let s = sin_fast(t);
        *o = v + inv * (s * s);
    }
    if slow {
        for (o, v) in y.iter_mut().zip(x) {
            let v = (v - m) * a + c;
            let t = alpha * v;
            if needs_slow_path(t) {
                let s = sin_slow(t);
                *o = v + inv * (s * s);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;
