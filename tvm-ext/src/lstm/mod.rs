//! Multi-layer float32 LSTM with the semantics of PyTorch's `nn.LSTM`, including
//! variable-length (packed) batches.
//!
//! Global name: `kokoro_tvm_ext.lstm`, destination-passing, called packed because
//! the argument count depends on the flags:
//!
//! ```text
//! kokoro_tvm_ext.lstm(
//!   num_layers: int >= 1, bidirectional: 0/1, batch_first: 0/1,
//!   has_biases: 0/1, has_lengths: 0/1, has_state: 0/1,
//!   x:       float32 [B, T, I] if batch_first else [T, B, I]   (any strides)
//!   lengths: int64 [B], each in 1..=T              -- only if has_lengths
//!   h0, c0:  float32 [L*D, B, H]                   -- only if has_state
//!   for layer l in 0..L, for direction d in 0..D (0 forward, 1 reverse):
//!     w_ih float32 [4H, in_l], w_hh float32 [4H, H],
//!     and if has_biases: b_ih float32 [4H], b_hh float32 [4H]
//!     (in_0 = I, in_l = D*H for l > 0; gate rows ordered i, f, g, o as in torch)
//!   OUT y:   float32 [B, T, D*H] if batch_first else [T, B, D*H]   (contiguous)
//!   OUT h_n: float32 [L*D, B, H]                                   (contiguous)
//!   OUT c_n: float32 [L*D, B, H]                                   (contiguous)
//! )
//! ```
//!
//! `H` is `w_hh.shape[1]`, `D` is 2 if bidirectional else 1. With lengths the
//! result equals torch's `pack_padded_sequence(x, lengths, batch_first,
//! enforce_sorted=False)` → `nn.LSTM` → `pad_packed_sequence` padded back to `T`:
//! sequence `b` runs only the steps `t < lengths[b]` (the reverse direction starts
//! at `lengths[b] - 1`), `y` is exactly zero at `t >= lengths[b]` in every layer,
//! and `h_n`/`c_n` hold each sequence's own final state. Without lengths every
//! sequence has length `T`; without state `h0 = c0 = 0`.
//!
//! [`lstm_forward`] is the same kernel for plain Rust callers.
//!
//! How it runs, per layer and direction: the input projection of all time steps
//! of a sequence is one `matrixmultiply::sgemm` with both biases folded in; the
//! recurrence then adds `h_{t-1} W_hh^T` per step, with `W_hh` packed once per
//! call into 64-gate panels `[H][64]` so a step streams the weights contiguously
//! (AVX-512, AVX2+FMA or NEON kernels chosen at run time, a portable loop
//! otherwise; up to four sequences share each weight load), and the gate
//! nonlinearities use a vectorised `exp` accurate to well under 1e-6. Directions and groups of
//! sequences run in parallel on rayon's global pool: with at least one
//! (direction, group) per thread each runs on its own from packing to its last
//! step; with fewer, the projections are first split across all threads and
//! each step's hidden units are shared out among the threads left over (one
//! window of the speaker encoder on two threads: the halves of `W_hh` stay in
//! each core's L2 cache), the same bits on any number of threads.
//!
//! The parameters are listed once in [`crate::interface::LSTM`]. Files:
//! `call.rs` reads a packed call, `schedule.rs` plans and runs the layers,
//! `pool.rs` holds the aligned buffers, `kernels.rs` (with `x86.rs`: AVX-512,
//! AVX2; `arm.rs`: NEON) the recurrent products per
//! instruction set, and `cell.rs` the gate nonlinearities.
use std::ops::{Deref, DerefMut};

use rayon::prelude::*;
use tvm_ffi::{bail, ensure, AnyView, Function, Result, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor, Span};
use crate::interface;
use crate::isa::Isa;
use crate::tensor::{
    check_dtype, checked_len, dim, expect_len, expect_shape, input, output, shape_of,
};

/// The shape of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LstmConfig {
    pub num_layers: usize,
    pub bidirectional: bool,
    pub batch_first: bool,
    /// `B`.
    pub batch: usize,
    /// `T`, at least 1.
    pub seq_len: usize,
    /// `I`.
    pub input_size: usize,
    /// `H`, at least 1.
    pub hidden_size: usize,
}

impl LstmConfig {
    /// `D`: 2 if bidirectional, else 1.
    pub fn directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    /// The input width of `layer`: `I` for the first, `D*H` after.
    pub fn layer_input_size(&self, layer: usize) -> usize {
        if layer == 0 {
            self.input_size
        } else {
            self.directions() * self.hidden_size
        }
    }
}

/// The parameters of one (layer, direction), row-major as torch stores them.
#[derive(Clone, Copy, Debug)]
pub struct LayerDirWeights<'a> {
    /// `[4H, in_l]`.
    pub w_ih: &'a [f32],
    /// `[4H, H]`.
    pub w_hh: &'a [f32],
    /// `[4H]`, absent without biases.
    pub b_ih: Option<&'a [f32]>,
    /// `[4H]`, absent without biases.
    pub b_hh: Option<&'a [f32]>,
}

#[cfg(target_arch = "aarch64")]
mod arm;
mod call;
mod cell;
mod kernels;
mod pool;
mod schedule;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use call::lstm_packed;
use call::*;
use cell::*;
use kernels::*;
use pool::*;
use schedule::*;

/// The registered function.
pub fn function() -> Function {
    dps_function(lstm_packed)
}

// ---------------------------------------------------------------------------
// The plain-Rust entry point.
// ---------------------------------------------------------------------------

/// Runs the LSTM described by `cfg` (see the module docs for the semantics).
///
/// All buffers are dense row-major: `x` is `[B, T, I]` or `[T, B, I]` following
/// `cfg.batch_first`, `y` likewise with `D*H` features, `lengths` (each in
/// `1..=T`) is `[B]`, `h0`, `c0`, `h_n` and `c_n` are `[L*D, B, H]`, and
/// `weights` holds `L*D` entries, layer-major then direction (forward, reverse).
#[allow(clippy::too_many_arguments)]
pub fn lstm_forward(
    cfg: &LstmConfig,
    x: &[f32],
    lengths: Option<&[i64]>,
    h0c0: Option<(&[f32], &[f32])>,
    weights: &[LayerDirWeights],
    y: &mut [f32],
    h_n: &mut [f32],
    c_n: &mut [f32],
) -> Result<()> {
    forward_with(Isa::best(), cfg, x, lengths, h0c0, weights, y, h_n, c_n)
}

/// Validates every buffer against `cfg`, returning the sequence lengths.
#[allow(clippy::too_many_arguments)]
fn validate(
    cfg: &LstmConfig,
    x: &[f32],
    lengths: Option<&[i64]>,
    h0c0: Option<(&[f32], &[f32])>,
    weights: &[LayerDirWeights],
    y: &[f32],
    h_n: &[f32],
    c_n: &[f32],
) -> Result<Vec<usize>> {
    let (l, b, t, i, h) = (
        cfg.num_layers,
        cfg.batch,
        cfg.seq_len,
        cfg.input_size,
        cfg.hidden_size,
    );
    let d = cfg.directions();
    ensure!(
        l >= 1,
        VALUE_ERROR,
        "lstm: num_layers: expected a value >= 1, got {l}"
    );
    ensure!(
        h >= 1,
        VALUE_ERROR,
        "lstm: the hidden size must be at least 1, got {h}"
    );
    ensure!(
        t >= 1,
        VALUE_ERROR,
        "lstm: x: the sequence length must be at least 1, got {t}"
    );
    // Every product the kernel forms is checked here once, so that index
    // arithmetic after validation cannot overflow.
    let ld = checked_len("lstm: num_layers", &[l, d])?;
    let dh = checked_len("lstm: hidden size", &[d, h])?;
    let g4 = checked_len("lstm: hidden size", &[4, h])?;
    let gp = match g4.checked_add(NB - 1) {
        Some(v) => v / NB * NB,
        None => bail!(VALUE_ERROR, "lstm: hidden size {h} overflows"),
    };
    checked_len(
        "lstm: weights",
        &[gp, h.max(i).max(dh), ld.saturating_add(1)],
    )?;
    checked_len("lstm: gate buffers", &[b, t, gp, d + 1])?;
    let x_dims = if cfg.batch_first {
        [b, t, i]
    } else {
        [t, b, i]
    };
    expect_len("lstm: x", x.len(), &x_dims)?;
    let y_dims = if cfg.batch_first {
        [b, t, dh]
    } else {
        [t, b, dh]
    };
    expect_len("lstm: y", y.len(), &y_dims)?;
    expect_len("lstm: h_n", h_n.len(), &[ld, b, h])?;
    expect_len("lstm: c_n", c_n.len(), &[ld, b, h])?;
    if let Some((h0, c0)) = h0c0 {
        expect_len("lstm: h0", h0.len(), &[ld, b, h])?;
        expect_len("lstm: c0", c0.len(), &[ld, b, h])?;
    }
    ensure!(
        weights.len() == ld,
        VALUE_ERROR,
        "lstm: weights: expected {ld} (layer, direction) entries, got {}",
        weights.len()
    );
    for (k, w) in weights.iter().enumerate() {
        let (layer, dir) = (k / d, k % d);
        let in_l = cfg.layer_input_size(layer);
        expect_len(
            &weight_name("w_ih", layer, dir),
            w.w_ih.len(),
            &[4 * h, in_l],
        )?;
        expect_len(&weight_name("w_hh", layer, dir), w.w_hh.len(), &[4 * h, h])?;
        if let Some(bias) = w.b_ih {
            expect_len(&weight_name("b_ih", layer, dir), bias.len(), &[4 * h])?;
        }
        if let Some(bias) = w.b_hh {
            expect_len(&weight_name("b_hh", layer, dir), bias.len(), &[4 * h])?;
        }
    }
    match lengths {
        None => Ok(vec![t; b]),
        Some(lens) => {
            ensure!(
                lens.len() == b,
                VALUE_ERROR,
                "lstm: lengths: expected {b} entries, got {}",
                lens.len()
            );
            let mut out = Vec::with_capacity(b);
            for (k, &v) in lens.iter().enumerate() {
                ensure!(
                    v >= 1 && v as u64 <= t as u64,
                    VALUE_ERROR,
                    "lstm: lengths[{k}] = {v} is out of range 1..={t}"
                );
                out.push(v as usize);
            }
            Ok(out)
        }
    }
}
