//! The weights of the int8 kernels: quantized and packed once, at compile time,
//! by the registered packer, one block per group:
//!
//! ```text
//! kokoro_tvm_ext.pack_int8(kind: "conv1d" | "conv1d_transpose" | "matmul", groups >= 1,
//!                          w: float32) -> int8 tensor [g, words, 4], per group the words
//!   [panels: P words of four int8 | scale: C float32 | sum: C int32]
//!   conv1d            w [Cout, Cin/g, K]: the A operand, Cout/g rows, inner K*4*ceil(Cin/g/4),
//!                     tap-major, channels padded with zeros to quads (C = Cout/g)
//!   conv1d_transpose  w [Cin, Cout/g, K]: the B operand, inner Cin/g, Cout/g*K columns (C = Cout/g*K)
//!   matmul            w [K, N]:           the B operand, inner K, N columns (C = N; groups = 1)
//! ```
//!
//! `scale` and `sum` are per row (conv1d) or column (the others) of the packed
//! operand: the channel's scale and the sum of its int8 values (for the
//! activations' zero point). Quantization is symmetric, to -127..=127, per
//! output channel (a transposed convolution's channel spans its K columns):
//! scale = max |w| / 127. Weights that already sit on one int8 grid (a
//! dequantized per-tensor int8 export: every w a multiple of one step, at most
//! 127 of them) keep that grid as every channel's scale, so they come back exactly.
//!
//! Where the CPU lacks int8 dot products (AVX512-VNNI; on aarch64 dotprod and
//! i8mm), or `KOKORO_TVM_EXT_NO_VNNI=1`, the kernels dequantize the weights to
//! f32 and run the f32 kernels.
use std::borrow::Cow;

use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, Tensor, TensorView, VALUE_ERROR};

use super::{quads, Affine, Kind, PackedA, PackedB, MAX_K, MR, NR};
use crate::gemm::packed::{as_words, conv_inner, pack_args, PackArgs};
use crate::interface;
use crate::tensor::{expect_shape, input};

/// The registered `kokoro_tvm_ext.pack_int8`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The operand of one group: `(inner k, rows or columns, taps per channel)`.
/// conv1d's inner dimension is tap-major, its channels padded to quads with
/// zeros ([`conv_inner`]).
fn operand(kind: Kind, groups: usize, w_shape: &[usize]) -> (usize, usize, usize) {
    match (kind, w_shape) {
        (Kind::Conv1d, &[cout, cin_g, k]) => (4 * quads(cin_g) * k, cout / groups, 1),
        (Kind::Conv1dTranspose, &[cin, cout_g, k]) => (cin / groups, cout_g * k, k),
        (Kind::Matmul, &[k, n]) => (k, n, 1),
        _ => (0, 0, 1),
    }
}

/// `(P, C)`: words of packed panels and channels of one group, for weights
/// `w_shape` (torch's layout) of `kind`; the packed tensor is `[groups, P + 2C, 4]`.
pub fn packed_len(kind: Kind, groups: usize, w_shape: &[usize]) -> (usize, usize) {
    let (k, n, _) = operand(kind, groups, w_shape);
    let p = match kind {
        Kind::Conv1d => PackedA::len(n, k),
        _ => PackedB::len(k, n),
    };
    (p, n)
}

fn pack_packed(args: &[AnyView]) -> Result<Tensor> {
    const WHO: &str = "pack_int8";
    let PackArgs {
        kind,
        groups,
        w: wd,
        shape: ws,
    } = pack_args(&interface::PACK_INT8, args)?;
    let (k, n, taps) = operand(kind, groups, &ws);
    ensure!(
        k <= MAX_K,
        VALUE_ERROR,
        "{WHO}: w: an inner dimension of {k} is more than the int8 GEMM's {MAX_K}"
    );
    ensure!(
        wd.iter().all(|v| v.is_finite()),
        VALUE_ERROR,
        "{WHO}: w: expected finite weights"
    );
    let grid = tensor_grid(&wd);
    let (p, _) = packed_len(kind, groups, &ws);
    let words = p + 2 * n;
    let mut packed = vec![0u32; groups * words];
    let group_len = wd.len() / groups;
    for (gi, dst) in packed.chunks_exact_mut(words).enumerate() {
        let g = &wd[gi * group_len..][..group_len];
        // Element (l, j) of the group's operand: conv1d's rows are output
        // channels (j = o, l = (tap, c)); the others' rows are inner (j = column).
        let at = |l: usize, j: usize| match kind {
            Kind::Conv1d => {
                conv_inner::<4>(l, ws[1], ws[2]).map_or(0.0, |i| g[j * ws[1] * ws[2] + i])
            }
            _ => g[l * n + j],
        };
        let (panels, rest) = dst.split_at_mut(p);
        let (scales, sums) = rest.split_at_mut(n);
        // One scale per output channel: `taps` columns of the operand.
        for ch in 0..n / taps {
            let cols = ch * taps..(ch + 1) * taps;
            let max = cols
                .clone()
                .flat_map(|j| (0..k).map(move |l| (l, j)))
                .fold(0.0f32, |m, (l, j)| m.max(at(l, j).abs()));
            let s = grid.unwrap_or(max / 127.0);
            for j in cols {
                scales[j] = s.to_bits();
            }
        }
        let q = |l: usize, j: usize| {
            let s = f32::from_bits(scales[j]);
            if s > 0.0 {
                (at(l, j) / s).round_ties_even().clamp(-127.0, 127.0) as i8
            } else {
                0
            }
        };
        for (j, sum) in sums.iter_mut().enumerate() {
            *sum = (0..k).map(|l| q(l, j) as i32).sum::<i32>() as u32;
        }
        let width = if kind == Kind::Conv1d { MR } else { NR };
        let kq = quads(k);
        for (pi, panel) in panels.chunks_exact_mut(kq * width).enumerate() {
            for (qi, slot) in panel.chunks_exact_mut(width).enumerate() {
                for (r, v) in slot.iter_mut().enumerate() {
                    let j = pi * width + r;
                    let b = std::array::from_fn(|t| {
                        let l = 4 * qi + t;
                        if j < n && l < k {
                            q(l, j) as u8
                        } else {
                            0
                        }
                    });
                    *v = u32::from_le_bytes(b);
                }
            }
        }
    }
    let bytes: Vec<i8> = packed
        .iter()
        .flat_map(|w| w.to_le_bytes().map(|b| b as i8))
        .collect();
    Tensor::from_slice(&bytes, &[groups as i64, words as i64, 4])
}

/// The step of an int8 grid every weight sits on (within 1e-3 of a step), if
/// there is one: the smallest nonzero |w|, with every |w| at most 127 steps.
/// A dequantized per-tensor int8 export is such a grid (kokoro-onnx's int8
/// export: 64 of the decoder's 70 convolutions, the others not quantized).
fn tensor_grid(w: &[f32]) -> Option<f32> {
    let step = w
        .iter()
        .map(|v| v.abs())
        .filter(|&v| v > 0.0)
        .fold(f32::INFINITY, f32::min);
    let on = |v: &f32| {
        let x = (v / step).abs();
        x <= 127.001 && (x - x.round()).abs() <= 1e-3
    };
    (step.is_finite() && w.iter().all(on)).then_some(step)
}

/// The packed weights of one call, all groups, checked against their shape.
pub(crate) struct Weights<'a> {
    pub(super) words: Cow<'a, [u32]>,
    pub(super) p: usize,
    pub(super) n: usize,
}

/// The operand, scales and sums of one group.
pub(crate) struct Group<'a> {
    pub panels: &'a [u32],
    pub scale: &'a [f32],
    pub sum: &'a [i32],
}

impl Weights<'_> {
    pub fn group(&self, gi: usize) -> Group<'_> {
        let words = &self.words[gi * (self.p + 2 * self.n)..][..self.p + 2 * self.n];
        let (panels, rest) = words.split_at(self.p);
        let (scale, sum) = rest.split_at(self.n);
        // SAFETY: u32, f32 and i32 have one size and alignment; any bits are valid.
        unsafe {
            Group {
                panels,
                scale: std::slice::from_raw_parts(scale.as_ptr() as *const f32, self.n),
                sum: std::slice::from_raw_parts(sum.as_ptr() as *const i32, self.n),
            }
        }
    }
}

/// The packed weights of a call, after checking their shape against what
/// `pack_int8` makes of torch's `w_shape`.
pub(crate) fn packed_weights<'a>(
    who: &str,
    w: &TensorView,
    kind: Kind,
    groups: usize,
    w_shape: &[usize],
) -> Result<Weights<'a>> {
    let (p, n) = packed_len(kind, groups, w_shape);
    let shape = [groups as i64, (p + 2 * n) as i64, 4];
    if let Err(e) = expect_shape(w, &format!("{who}: w"), &shape) {
        bail!(
            VALUE_ERROR,
            "{} (weights packed by kokoro_tvm_ext.pack_int8)",
            e.message()
        );
    }
    let data: Cow<'a, [i8]> = input::<i8>(w, &format!("{who}: w"))?;
    let words = as_words(data, |b: [i8; 4]| u32::from_le_bytes(b.map(|x| x as u8)));
    Ok(Weights { words, p, n })
}

/// `w` dequantized to f32 in torch's layout (`kind`'s `w_shape`), into `dst`:
/// where int8 is not native, the f32 kernels run on these.
pub(crate) fn dequantize_into(
    w: &Weights,
    kind: Kind,
    groups: usize,
    w_shape: &[usize],
    dst: &mut [f32],
) {
    let (k, n, _) = operand(kind, groups, w_shape);
    let group_len = w_shape.iter().product::<usize>() / groups;
    let width = if kind == Kind::Conv1d { MR } else { NR };
    let kq = quads(k);
    for (gi, dst) in dst.chunks_exact_mut(group_len.max(1)).enumerate() {
        let g = w.group(gi);
        for j in 0..n {
            let base = ((j / width) * kq) * width + j % width;
            for l in 0..k {
                let word = g.panels[base + (l / 4) * width];
                let v = (word >> (8 * (l % 4))) as u8 as i8 as f32 * g.scale[j];
                match kind {
                    Kind::Conv1d => {
                        let (cin_g, taps) = (w_shape[1], w_shape[2]);
                        if let Some(i) = conv_inner::<4>(l, cin_g, taps) {
                            dst[j * cin_g * taps + i] = v;
                        }
                    }
                    _ => dst[l * n + j] = v,
                }
            }
        }
    }
}

/// The dequantization of a per-tile activation block: the same scale and zero
/// point for each of `n` rows or columns, written into `scale` and `off`.
pub(crate) fn fill_affine(quant: Affine, n: usize, scale: &mut [f32], off: &mut [i32]) {
    scale[..n].fill(quant.scale);
    off[..n].fill(quant.zero);
}
