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
//! (AVX-512 or AVX2+FMA kernels chosen at run time, a portable loop otherwise; up
//! to four sequences share each weight load), and the gate nonlinearities use a
//! vectorised `exp` accurate to well under 1e-6. Directions and groups of
//! sequences run in parallel on rayon's global pool: with at least one
//! (direction, group) per thread each runs on its own from packing to its last
//! step; with fewer, the projections are first split across all threads.
use std::ops::{Deref, DerefMut};

use rayon::prelude::*;
use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, TensorView, TYPE_ERROR, VALUE_ERROR};

use crate::isa::Isa;
use crate::tensor::{check_dtype, expect_shape, input, output, shape_of};

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

// ---------------------------------------------------------------------------
// The packed entry point.
// ---------------------------------------------------------------------------

/// The registered function.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        lstm_packed(args)?;
        Ok(Any::default())
    })
}

fn direction_name(d: usize) -> &'static str {
    if d == 0 {
        "forward"
    } else {
        "reverse"
    }
}

fn weight_name(kind: &str, layer: usize, d: usize) -> String {
    format!("lstm: {kind}[layer {layer}, {}]", direction_name(d))
}

fn int_arg(arg: AnyView, name: &str) -> Result<i64> {
    match i64::try_from(arg) {
        Ok(v) => Ok(v),
        Err(e) => bail!(TYPE_ERROR, "lstm: {name}: expected an int, {}", e.message()),
    }
}

fn flag_arg(arg: AnyView, name: &str) -> Result<bool> {
    let v = int_arg(arg, name)?;
    ensure!(v == 0 || v == 1, VALUE_ERROR, "lstm: {name}: expected 0 or 1, got {v}");
    Ok(v == 1)
}

fn tensor_arg(arg: AnyView, name: &str) -> Result<TensorView> {
    match TensorView::try_from(arg) {
        Ok(t) => Ok(t),
        Err(e) => bail!(TYPE_ERROR, "{name}: expected a tensor, {}", e.message()),
    }
}

fn dim(v: i64) -> usize {
    // Shapes were checked against non-negative expectations or are tensor dims.
    v.max(0) as usize
}

/// Byte range of a slice, `None` when empty.
fn span<T>(s: &[T]) -> Option<(usize, usize)> {
    if s.is_empty() {
        None
    } else {
        let start = s.as_ptr() as usize;
        Some((start, start + std::mem::size_of_val(s)))
    }
}

fn overlaps(a: Option<(usize, usize)>, b: Option<(usize, usize)>) -> bool {
    match (a, b) {
        (Some((a0, a1)), Some((b0, b1))) => a0 < b1 && b0 < a1,
        _ => false,
    }
}

/// Parses and validates the packed arguments, then runs [`lstm_forward`].
pub fn lstm_packed(args: &[AnyView]) -> Result<()> {
    ensure!(
        args.len() >= 6,
        VALUE_ERROR,
        "lstm: expected at least 6 arguments (num_layers, bidirectional, batch_first, \
         has_biases, has_lengths, has_state), got {}",
        args.len()
    );
    let num_layers = int_arg(args[0], "num_layers")?;
    ensure!(
        (1..=1 << 20).contains(&num_layers),
        VALUE_ERROR,
        "lstm: num_layers: expected a value >= 1, got {num_layers}"
    );
    let layers = num_layers as usize;
    let bidirectional = flag_arg(args[1], "bidirectional")?;
    let batch_first = flag_arg(args[2], "batch_first")?;
    let has_biases = flag_arg(args[3], "has_biases")?;
    let has_lengths = flag_arg(args[4], "has_lengths")?;
    let has_state = flag_arg(args[5], "has_state")?;
    let dirs = if bidirectional { 2 } else { 1 };
    let per_dir = if has_biases { 4 } else { 2 };
    let expected = 6 + 1 + has_lengths as usize + 2 * has_state as usize + layers * dirs * per_dir + 3;
    ensure!(
        args.len() == expected,
        VALUE_ERROR,
        "lstm: expected {expected} arguments for num_layers={layers}, bidirectional={}, \
         has_biases={}, has_lengths={}, has_state={}, got {}",
        bidirectional as i32,
        has_biases as i32,
        has_lengths as i32,
        has_state as i32,
        args.len()
    );

    // Take every tensor argument in order.
    let mut next = 6;
    let mut take = |name: &str| -> Result<TensorView> {
        let t = tensor_arg(args[next], name)?;
        next += 1;
        Ok(t)
    };
    let x = take("lstm: x")?;
    let lengths = if has_lengths {
        Some(take("lstm: lengths")?)
    } else {
        None
    };
    let state = if has_state {
        Some((take("lstm: h0")?, take("lstm: c0")?))
    } else {
        None
    };
    let mut params = Vec::with_capacity(layers * dirs);
    for l in 0..layers {
        for d in 0..dirs {
            let w_ih = take(&weight_name("w_ih", l, d))?;
            let w_hh = take(&weight_name("w_hh", l, d))?;
            let biases = if has_biases {
                Some((take(&weight_name("b_ih", l, d))?, take(&weight_name("b_hh", l, d))?))
            } else {
                None
            };
            params.push((w_ih, w_hh, biases));
        }
    }
    let y = take("lstm: y")?;
    let h_n = take("lstm: h_n")?;
    let c_n = take("lstm: c_n")?;

    // Dtypes first, so a wrong dtype is reported as such.
    check_dtype::<f32>(&x, "lstm: x")?;
    if let Some(t) = &lengths {
        check_dtype::<i64>(t, "lstm: lengths")?;
    }
    if let Some((h0, c0)) = &state {
        check_dtype::<f32>(h0, "lstm: h0")?;
        check_dtype::<f32>(c0, "lstm: c0")?;
    }
    for (i, (w_ih, w_hh, biases)) in params.iter().enumerate() {
        let (l, d) = (i / dirs, i % dirs);
        check_dtype::<f32>(w_ih, &weight_name("w_ih", l, d))?;
        check_dtype::<f32>(w_hh, &weight_name("w_hh", l, d))?;
        if let Some((b_ih, b_hh)) = biases {
            check_dtype::<f32>(b_ih, &weight_name("b_ih", l, d))?;
            check_dtype::<f32>(b_hh, &weight_name("b_hh", l, d))?;
        }
    }
    check_dtype::<f32>(&y, "lstm: y")?;
    check_dtype::<f32>(&h_n, "lstm: h_n")?;
    check_dtype::<f32>(&c_n, "lstm: c_n")?;

    // Shapes.
    let xs = shape_of(&x, "lstm: x", 3)?;
    let (batch, seq_len) = if batch_first { (xs[0], xs[1]) } else { (xs[1], xs[0]) };
    let input_size = xs[2];
    ensure!(
        seq_len >= 1,
        VALUE_ERROR,
        "lstm: x: the sequence length must be at least 1, got shape {:?}",
        xs
    );
    let whh0 = shape_of(&params[0].1, &weight_name("w_hh", 0, 0), 2)?;
    let hidden = whh0[1];
    ensure!(
        (1..=1 << 28).contains(&hidden),
        VALUE_ERROR,
        "{}: the hidden size (shape[1]) must be at least 1, got shape {:?}",
        weight_name("w_hh", 0, 0),
        whh0
    );
    let gates = 4 * hidden;
    let ld = (layers * dirs) as i64;
    if let Some(t) = &lengths {
        expect_shape(t, "lstm: lengths", &[batch])?;
    }
    if let Some((h0, c0)) = &state {
        expect_shape(h0, "lstm: h0", &[ld, batch, hidden])?;
        expect_shape(c0, "lstm: c0", &[ld, batch, hidden])?;
    }
    for (i, (w_ih, w_hh, biases)) in params.iter().enumerate() {
        let (l, d) = (i / dirs, i % dirs);
        let in_l = if l == 0 { input_size } else { dirs as i64 * hidden };
        expect_shape(w_ih, &weight_name("w_ih", l, d), &[gates, in_l])?;
        expect_shape(w_hh, &weight_name("w_hh", l, d), &[gates, hidden])?;
        if let Some((b_ih, b_hh)) = biases {
            expect_shape(b_ih, &weight_name("b_ih", l, d), &[gates])?;
            expect_shape(b_hh, &weight_name("b_hh", l, d), &[gates])?;
        }
    }
    let dh = dirs as i64 * hidden;
    let y_shape = if batch_first {
        [batch, seq_len, dh]
    } else {
        [seq_len, batch, dh]
    };
    expect_shape(&y, "lstm: y", &y_shape)?;
    expect_shape(&h_n, "lstm: h_n", &[ld, batch, hidden])?;
    expect_shape(&c_n, "lstm: c_n", &[ld, batch, hidden])?;

    // Data.
    let x_data = input::<f32>(&x, "lstm: x")?;
    let len_data = match &lengths {
        Some(t) => Some(input::<i64>(t, "lstm: lengths")?),
        None => None,
    };
    let state_data = match &state {
        Some((h0, c0)) => Some((input::<f32>(h0, "lstm: h0")?, input::<f32>(c0, "lstm: c0")?)),
        None => None,
    };
    let mut param_data = Vec::with_capacity(params.len());
    for (i, (w_ih, w_hh, biases)) in params.iter().enumerate() {
        let (l, d) = (i / dirs, i % dirs);
        let w_ih = input::<f32>(w_ih, &weight_name("w_ih", l, d))?;
        let w_hh = input::<f32>(w_hh, &weight_name("w_hh", l, d))?;
        let biases = match biases {
            Some((b_ih, b_hh)) => Some((
                input::<f32>(b_ih, &weight_name("b_ih", l, d))?,
                input::<f32>(b_hh, &weight_name("b_hh", l, d))?,
            )),
            None => None,
        };
        param_data.push((w_ih, w_hh, biases));
    }
    let y_data = output::<f32>(&y, "lstm: y")?;
    let hn_data = output::<f32>(&h_n, "lstm: h_n")?;
    let cn_data = output::<f32>(&c_n, "lstm: c_n")?;

    // Outputs must not share memory with each other or with an input.
    let outs = [("y", span(y_data)), ("h_n", span(hn_data)), ("c_n", span(cn_data))];
    let mut ins: Vec<(String, Option<(usize, usize)>)> = vec![("x".into(), span(&x_data))];
    if let Some(v) = &len_data {
        ins.push(("lengths".into(), span(v)));
    }
    if let Some((h0, c0)) = &state_data {
        ins.push(("h0".into(), span(h0)));
        ins.push(("c0".into(), span(c0)));
    }
    for (w_ih, w_hh, biases) in &param_data {
        ins.push(("a weight".into(), span(w_ih)));
        ins.push(("a weight".into(), span(w_hh)));
        if let Some((b_ih, b_hh)) = biases {
            ins.push(("a bias".into(), span(b_ih)));
            ins.push(("a bias".into(), span(b_hh)));
        }
    }
    for (i, (oname, o)) in outs.iter().enumerate() {
        for (other, p) in &outs[i + 1..] {
            ensure!(
                !overlaps(*o, *p),
                VALUE_ERROR,
                "lstm: {oname}: output memory overlaps output {other}"
            );
        }
        for (iname, p) in &ins {
            ensure!(
                !overlaps(*o, *p),
                VALUE_ERROR,
                "lstm: {oname}: output memory overlaps input {iname}"
            );
        }
    }

    let cfg = LstmConfig {
        num_layers: layers,
        bidirectional,
        batch_first,
        batch: dim(batch),
        seq_len: dim(seq_len),
        input_size: dim(input_size),
        hidden_size: dim(hidden),
    };
    let weights: Vec<LayerDirWeights> = param_data
        .iter()
        .map(|(w_ih, w_hh, biases)| LayerDirWeights {
            w_ih,
            w_hh,
            b_ih: biases.as_ref().map(|(b, _)| &**b),
            b_hh: biases.as_ref().map(|(_, b)| &**b),
        })
        .collect();
    let state_ref = state_data.as_ref().map(|(h0, c0)| (&**h0, &**c0));
    lstm_forward(
        &cfg,
        &x_data,
        len_data.as_deref(),
        state_ref,
        &weights,
        y_data,
        hn_data,
        cn_data,
    )
}

// ---------------------------------------------------------------------------
// The plain-Rust entry point.
// ---------------------------------------------------------------------------

fn checked_len(dims: &[usize], name: &str) -> Result<usize> {
    let mut n = 1usize;
    for &d in dims {
        n = match n.checked_mul(d) {
            Some(n) => n,
            None => bail!(VALUE_ERROR, "{name}: size {:?} overflows", dims),
        };
    }
    Ok(n)
}

fn expect_len(len: usize, dims: &[usize], name: &str) -> Result<()> {
    let want = checked_len(dims, name)?;
    ensure!(
        len == want,
        VALUE_ERROR,
        "{name}: expected {want} elements (shape {:?}), got {len}",
        dims
    );
    Ok(())
}

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
    let (l, b, t, i, h) = (cfg.num_layers, cfg.batch, cfg.seq_len, cfg.input_size, cfg.hidden_size);
    let d = cfg.directions();
    ensure!(l >= 1, VALUE_ERROR, "lstm: num_layers: expected a value >= 1, got {l}");
    ensure!(h >= 1, VALUE_ERROR, "lstm: the hidden size must be at least 1, got {h}");
    ensure!(
        t >= 1,
        VALUE_ERROR,
        "lstm: x: the sequence length must be at least 1, got {t}"
    );
    // Every product the kernel forms is checked here once, so that index
    // arithmetic after validation cannot overflow.
    let ld = checked_len(&[l, d], "lstm: num_layers")?;
    let dh = checked_len(&[d, h], "lstm: hidden size")?;
    let g4 = checked_len(&[4, h], "lstm: hidden size")?;
    let gp = match g4.checked_add(NB - 1) {
        Some(v) => v / NB * NB,
        None => bail!(VALUE_ERROR, "lstm: hidden size {h} overflows"),
    };
    checked_len(&[gp, h.max(i).max(dh), ld.saturating_add(1)], "lstm: weights")?;
    checked_len(&[b, t, gp, d + 1], "lstm: gate buffers")?;
    let x_dims = if cfg.batch_first { [b, t, i] } else { [t, b, i] };
    expect_len(x.len(), &x_dims, "lstm: x")?;
    let y_dims = if cfg.batch_first { [b, t, dh] } else { [t, b, dh] };
    expect_len(y.len(), &y_dims, "lstm: y")?;
    expect_len(h_n.len(), &[ld, b, h], "lstm: h_n")?;
    expect_len(c_n.len(), &[ld, b, h], "lstm: c_n")?;
    if let Some((h0, c0)) = h0c0 {
        expect_len(h0.len(), &[ld, b, h], "lstm: h0")?;
        expect_len(c0.len(), &[ld, b, h], "lstm: c0")?;
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
        expect_len(w.w_ih.len(), &[4 * h, in_l], &weight_name("w_ih", layer, dir))?;
        expect_len(w.w_hh.len(), &[4 * h, h], &weight_name("w_hh", layer, dir))?;
        if let Some(bias) = w.b_ih {
            expect_len(bias.len(), &[4 * h], &weight_name("b_ih", layer, dir))?;
        }
        if let Some(bias) = w.b_hh {
            expect_len(bias.len(), &[4 * h], &weight_name("b_hh", layer, dir))?;
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

/// Gate columns per packed panel of `W_hh^T`.
const NB: usize = 64;
/// Sequences advanced together by one recurrent mat-mul.
const MAX_GROUP: usize = 4;
/// Fewest rows worth one input-projection task of its own.
const MIN_PROJ_ROWS: usize = 16;

/// Writes into disjoint parts of one output buffer from several tasks.
#[derive(Clone, Copy)]
struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks write disjoint (row, direction) ranges and nobody reads the buffer
// while they run; see `run_recurrence`.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Copies `src` to `offset`. The caller guarantees no other task touches it.
    unsafe fn write(&self, offset: usize, src: &[f32]) {
        assert!(offset <= self.len && src.len() <= self.len - offset);
        std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len());
    }
}

/// The geometry shared by all tasks of one layer.
struct Layer<'a> {
    isa: Isa,
    layer: usize,
    dirs: usize,
    batch: usize,
    seq_len: usize,
    hidden: usize,
    /// Gate row stride: `4H` rounded up to a multiple of [`NB`].
    gp: usize,
    batch_first: bool,
    lens: &'a [usize],
}

impl Layer<'_> {
    /// Row of `(b, t)` in `x`, `y` and the layer buffers.
    fn row(&self, b: usize, t: usize) -> usize {
        if self.batch_first {
            b * self.seq_len + t
        } else {
            t * self.batch + b
        }
    }

    /// Offset of the projected gates of `(d, b, t)`.
    fn proj_offset(&self, d: usize, b: usize, t: usize) -> usize {
        ((d * self.batch + b) * self.seq_len + t) * self.gp
    }
}

#[allow(clippy::too_many_arguments)]
fn forward_with(
    isa: Isa,
    cfg: &LstmConfig,
    x: &[f32],
    lengths: Option<&[i64]>,
    h0c0: Option<(&[f32], &[f32])>,
    weights: &[LayerDirWeights],
    y: &mut [f32],
    h_n: &mut [f32],
    c_n: &mut [f32],
) -> Result<()> {
    let lens = validate(cfg, x, lengths, h0c0, weights, y, h_n, c_n)?;
    let (batch, seq_len, hidden) = (cfg.batch, cfg.seq_len, cfg.hidden_size);
    let dirs = cfg.directions();
    if batch == 0 {
        return Ok(());
    }
    let dh = dirs * hidden;
    let gp = (4 * hidden).div_ceil(NB) * NB;
    let geometry = |layer| Layer {
        isa,
        layer,
        dirs,
        batch,
        seq_len,
        hidden,
        gp,
        batch_first: cfg.batch_first,
        lens: &lens,
    };

    // Sequences longest first, dealt round-robin into groups that run in
    // parallel; the active ones of a group at step t are then a prefix.
    let mut order: Vec<usize> = (0..batch).collect();
    order.sort_by_key(|&b| std::cmp::Reverse(lens[b]));
    let threads = rayon::current_num_threads().max(1);
    let groups_per_dir = batch.min(threads.div_ceil(dirs)).max(1);
    let groups: Vec<Vec<usize>> = (0..groups_per_dir)
        .map(|g| order.iter().copied().skip(g).step_by(groups_per_dir).collect())
        .collect();
    let tasks: Vec<(usize, &[usize])> = (0..dirs)
        .flat_map(|d| groups.iter().map(move |grp| (d, &grp[..])))
        .collect();
    // With a task per thread, each task runs its (layer, direction, group)
    // from packing to the last step on its own, in one parallel region per
    // layer and with its projections still in its cache. With fewer tasks than
    // threads the projections are computed first by all threads.
    let fused = tasks.len() >= threads;

    let mut prev = AlignedBuf::scratch(0);
    for layer in 0..cfg.num_layers {
        let g = geometry(layer);
        let last = layer + 1 == cfg.num_layers;
        let (inp, in_size) = if layer == 0 {
            (x, cfg.input_size)
        } else {
            (&prev[..], dh)
        };
        let lw = &weights[layer * dirs..(layer + 1) * dirs];

        let mut buf = AlignedBuf::scratch(0);
        let out: &mut [f32] = if last {
            &mut *y
        } else {
            buf = AlignedBuf::scratch(batch * seq_len * dh);
            &mut buf
        };
        // Padded steps are zero; the recurrence writes every other row.
        for (b, &len) in lens.iter().enumerate() {
            for t in len..seq_len {
                let r = g.row(b, t) * dh;
                out[r..r + dh].fill(0.0);
            }
        }
        let shared = SharedOut {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        };

        type Finals = Vec<(usize, Vec<f32>, Vec<f32>)>;
        let finals: Vec<(usize, Finals)> = if fused {
            tasks
                .par_iter()
                .map(|&(d, grp)| {
                    let w = &lw[d];
                    let pack = pack_recurrent(isa, w.w_hh, hidden, gp);
                    let bias = combined_bias(w, 4 * hidden);
                    let mut proj = AlignedBuf::scratch(grp.len() * seq_len * gp);
                    for (slab, &b) in proj.chunks_mut(seq_len * gp).zip(grp) {
                        project_rows(
                            &g,
                            inp,
                            in_size,
                            w.w_ih,
                            bias.as_deref(),
                            b,
                            0,
                            &mut slab[..g.lens[b] * gp],
                        );
                    }
                    let offset = |i: usize, t: usize| (i * seq_len + t) * gp;
                    (d, run_recurrence(&g, d, grp, &pack, &proj, offset, h0c0, shared))
                })
                .collect()
        } else {
            let packs: Vec<AlignedBuf> = lw.par_iter().map(|w| pack_recurrent(isa, w.w_hh, hidden, gp)).collect();
            let proj = project(&g, inp, in_size, lw);
            tasks
                .par_iter()
                .map(|&(d, grp)| {
                    let offset = |i: usize, t: usize| g.proj_offset(d, grp[i], t);
                    (d, run_recurrence(&g, d, grp, &packs[d], &proj, offset, h0c0, shared))
                })
                .collect()
        };
        for (d, seqs) in finals {
            for (b, hs, cs) in seqs {
                let off = ((layer * dirs + d) * batch + b) * hidden;
                h_n[off..off + hidden].copy_from_slice(&hs);
                c_n[off..off + hidden].copy_from_slice(&cs);
            }
        }
        if !last {
            prev = buf;
        }
    }
    Ok(())
}

/// `b_ih + b_hh`, or `None` without biases.
fn combined_bias(w: &LayerDirWeights, g4: usize) -> Option<Vec<f32>> {
    match (w.b_ih, w.b_hh) {
        (None, None) => None,
        (a, b) => Some(
            (0..g4)
                .map(|r| a.map_or(0.0, |a| a[r]) + b.map_or(0.0, |b| b[r]))
                .collect(),
        ),
    }
}

/// Input projections of one layer for all directions and sequences, `[D, B, T,
/// gp]`, computed by all threads. Steps past a sequence's length are unspecified
/// and never read.
fn project(g: &Layer, inp: &[f32], in_size: usize, lw: &[LayerDirWeights]) -> AlignedBuf {
    let (batch, seq_len, gp) = (g.batch, g.seq_len, g.gp);
    let mut proj = AlignedBuf::scratch(g.dirs * batch * seq_len * gp);
    let biases: Vec<Option<Vec<f32>>> = lw.iter().map(|w| combined_bias(w, 4 * g.hidden)).collect();
    let total_rows: usize = g.dirs * g.lens.iter().sum::<usize>();
    let threads = rayon::current_num_threads().max(1);
    let chunk_rows = total_rows.div_ceil(threads).max(MIN_PROJ_ROWS);
    let mut tasks = Vec::new();
    for (region, slab) in proj.chunks_mut(seq_len * gp).enumerate() {
        let (d, b) = (region / batch, region % batch);
        let len = g.lens[b];
        for (ci, chunk) in slab[..len * gp].chunks_mut(chunk_rows * gp).enumerate() {
            tasks.push((d, b, ci * chunk_rows, chunk));
        }
    }
    tasks.into_par_iter().for_each(|(d, b, t0, dst)| {
        project_rows(g, inp, in_size, lw[d].w_ih, biases[d].as_deref(), b, t0, dst);
    });
    proj
}

/// Projects steps `t0 .. t0 + dst.len() / gp` of sequence `b` into `dst` (row
/// stride gp): `x_t W_ih^T + bias`, zero in the padding columns.
#[allow(clippy::too_many_arguments)]
fn project_rows(
    g: &Layer,
    inp: &[f32],
    in_size: usize,
    w_ih: &[f32],
    bias: Option<&[f32]>,
    b: usize,
    t0: usize,
    dst: &mut [f32],
) {
    let (gp, g4) = (g.gp, 4 * g.hidden);
    let rows = dst.len() / gp;
    for row in dst.chunks_exact_mut(gp) {
        match bias {
            Some(bias) => row[..g4].copy_from_slice(bias),
            // sgemm with beta = 0 overwrites these, unless in_size = 0.
            None if in_size == 0 => row[..g4].fill(0.0),
            None => {}
        }
        row[g4..].fill(0.0);
    }
    if in_size == 0 || rows == 0 {
        return;
    }
    // Step between consecutive time steps of one sequence, in input rows.
    let t_step = if g.batch_first { 1 } else { g.batch };
    let first = g.row(b, t0) * in_size;
    let last = (g.row(b, t0 + rows - 1) + 1) * in_size;
    assert!(last <= inp.len() && w_ih.len() == g4 * in_size && dst.len() == rows * gp && t0 + rows <= g.seq_len);
    let beta = if bias.is_some() { 1.0 } else { 0.0 };
    // SAFETY: A reads rows (b, t0..t0+rows) of `inp`, all within `first..last`;
    // B is W_ih^T read through swapped strides of the [4H, in] matrix; C is
    // `rows` x 4H inside `dst` with row stride gp >= 4H.
    unsafe {
        matrixmultiply::sgemm(
            rows,
            in_size,
            g4,
            1.0,
            inp[first..].as_ptr(),
            (t_step * in_size) as isize,
            1,
            w_ih.as_ptr(),
            1,
            in_size as isize,
            beta,
            dst.as_mut_ptr(),
            gp as isize,
            1,
        );
    }
}

/// `W_hh` `[4H, H]` as panels `[gp / NB][H][NB]`: panel `p`, row `k` holds
/// `W_hh[p*NB .. p*NB+NB, k]`, zero past row 4H.
fn pack_recurrent(isa: Isa, w_hh: &[f32], hidden: usize, gp: usize) -> AlignedBuf {
    let g4 = 4 * hidden;
    assert!(w_hh.len() == g4 * hidden && gp >= g4 && gp.is_multiple_of(NB));
    let mut packed = AlignedBuf::scratch(gp * hidden);
    for (p, panel) in packed.chunks_mut(hidden * NB).enumerate() {
        let rows = NB.min(g4 - p * NB);
        if rows < NB {
            for line in panel.chunks_exact_mut(NB) {
                line[rows..].fill(0.0);
            }
        }
        let src = &w_hh[p * NB * hidden..(p * NB + rows) * hidden];
        // Full 8x8 blocks with SIMD where available, the rest one by one.
        let (rows8, k8) = match isa {
            Isa::Portable => (0, 0),
            #[cfg(target_arch = "x86_64")]
            _ => (rows / 8 * 8, hidden / 8 * 8),
        };
        #[cfg(target_arch = "x86_64")]
        if rows8 > 0 && k8 > 0 {
            for c0 in (0..rows8).step_by(8) {
                for k0 in (0..k8).step_by(8) {
                    // SAFETY: avx2 was detected (both SIMD ISAs imply it). The
                    // block reads src rows c0..c0+8, columns k0..k0+8 (inside
                    // `src`: c0+8 <= rows, k0+8 <= hidden) and writes panel rows
                    // k0..k0+8, columns c0..c0+8 (inside `panel`: NB columns).
                    unsafe {
                        avx2::transpose8(
                            src.as_ptr().add(c0 * hidden + k0),
                            hidden,
                            panel.as_mut_ptr().add(k0 * NB + c0),
                            NB,
                        )
                    }
                }
            }
        }
        for (c, row) in src.chunks_exact(hidden).enumerate() {
            let k_from = if c < rows8 { k8 } else { 0 };
            for (k, &v) in row.iter().enumerate().skip(k_from) {
                panel[k * NB + c] = v;
            }
        }
    }
    packed
}

/// Runs direction `d` over the sequences `grp` (longest first) and writes their
/// hidden states to rows of `out`; returns each sequence's final `(b, h, c)`.
/// The projected gates of `grp[i]` at step `t` start at `proj_offset(i, t)`.
#[allow(clippy::too_many_arguments)]
fn run_recurrence(
    g: &Layer,
    d: usize,
    grp: &[usize],
    pack: &[f32],
    proj: &[f32],
    proj_offset: impl Fn(usize, usize) -> usize,
    h0c0: Option<(&[f32], &[f32])>,
    out: SharedOut,
) -> Vec<(usize, Vec<f32>, Vec<f32>)> {
    let (h, gp) = (g.hidden, g.gp);
    let n = grp.len();
    let mut hs = vec![0.0f32; n * h];
    let mut cs = vec![0.0f32; n * h];
    if let Some((h0, c0)) = h0c0 {
        for (i, &b) in grp.iter().enumerate() {
            let off = ((g.layer * g.dirs + d) * g.batch + b) * h;
            hs[i * h..(i + 1) * h].copy_from_slice(&h0[off..off + h]);
            cs[i * h..(i + 1) * h].copy_from_slice(&c0[off..off + h]);
        }
    }
    let mut gates = AlignedBuf::zeros(MAX_GROUP * gp);
    let out_stride = g.dirs * h;
    let max_len = grp.first().map_or(0, |&b| g.lens[b]);
    for step in 0..max_len {
        let t = if d == 0 { step } else { max_len - 1 - step };
        // Sequences with lengths[b] > t take part in step t: a prefix of `grp`.
        // A reverse sequence joins at t = lengths[b] - 1 with its initial state.
        let active = grp.partition_point(|&b| g.lens[b] > t);
        let mut i0 = 0;
        while i0 < active {
            let s = (active - i0).min(MAX_GROUP);
            let mut init: [&[f32]; MAX_GROUP] = [&[]; MAX_GROUP];
            let mut hv: [&[f32]; MAX_GROUP] = [&[]; MAX_GROUP];
            for j in 0..s {
                let off = proj_offset(i0 + j, t);
                init[j] = &proj[off..off + gp];
                hv[j] = &hs[(i0 + j) * h..(i0 + j + 1) * h];
            }
            recurrent_matmul(g.isa, pack, h, &init[..s], &hv[..s], &mut gates[..s * gp]);
            for j in 0..s {
                let i = i0 + j;
                let (hi, ci) = (&mut hs[i * h..(i + 1) * h], &mut cs[i * h..(i + 1) * h]);
                cell(g.isa, &gates[j * gp..j * gp + 4 * h], ci, hi);
                // SAFETY: row (b, t), columns d*H..(d+1)*H belong to this task
                // alone: b is in one group of direction d, and t is visited once.
                unsafe { out.write(g.row(grp[i], t) * out_stride + d * h, hi) };
            }
            i0 += s;
        }
    }
    grp.iter()
        .enumerate()
        .map(|(i, &b)| (b, hs[i * h..(i + 1) * h].to_vec(), cs[i * h..(i + 1) * h].to_vec()))
        .collect()
}

// ---------------------------------------------------------------------------
// Buffers and kernels.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// An f32 buffer aligned to 64 bytes. Large ones come from and go back to a
/// small process-wide pool: fresh pages cost a page fault each, which for the
/// megabyte-sized buffers of one call adds up to a noticeable share of it.
struct AlignedBuf {
    lines: Vec<Line>,
    len: usize,
}

/// Buffers below this many floats are allocated directly.
const POOL_MIN: usize = 1 << 14;
/// At most this many buffers, and this many floats in all, are kept.
const POOL_BUFFERS: usize = 16;
const POOL_FLOATS: usize = 1 << 26;

static POOL: std::sync::Mutex<Vec<Vec<Line>>> = std::sync::Mutex::new(Vec::new());

fn pool() -> std::sync::MutexGuard<'static, Vec<Vec<Line>>> {
    POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl AlignedBuf {
    /// A buffer whose contents are unspecified (zeros or earlier data).
    fn scratch(len: usize) -> Self {
        let n = len.div_ceil(16);
        let mut lines = Vec::new();
        if len >= POOL_MIN {
            let mut pool = pool();
            // The smallest kept buffer that is large enough.
            let best = (0..pool.len())
                .filter(|&i| pool[i].capacity() >= n)
                .min_by_key(|&i| pool[i].capacity());
            if let Some(i) = best {
                lines = pool.swap_remove(i);
            }
        }
        if lines.len() < n {
            lines.resize(n, Line([0.0; 16]));
        }
        lines.truncate(n);
        Self { lines, len }
    }

    fn zeros(len: usize) -> Self {
        let mut buf = Self::scratch(len);
        buf.lines.fill(Line([0.0; 16]));
        buf
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len < POOL_MIN {
            return;
        }
        let lines = std::mem::take(&mut self.lines);
        let mut pool = pool();
        let kept: usize = pool.iter().map(|v| v.capacity() * 16).sum();
        if pool.len() < POOL_BUFFERS && kept + lines.capacity() * 16 <= POOL_FLOATS {
            pool.push(lines);
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `lines` holds at least `len` contiguous, initialised f32s.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const f32, self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut f32, self.len) }
    }
}

/// `out[j] = init[j] + W_hh h[j]` for each sequence j, over padded gate rows.
fn recurrent_matmul(isa: Isa, pack: &[f32], hidden: usize, init: &[&[f32]], h: &[&[f32]], out: &mut [f32]) {
    let s = init.len();
    let gp = pack.len() / hidden;
    assert!(
        gp.is_multiple_of(NB)
            && pack.len() == gp * hidden
            && h.len() == s
            && (1..=MAX_GROUP).contains(&s)
            && out.len() == s * gp
            && init.iter().all(|r| r.len() == gp)
            && h.iter().all(|v| v.len() == hidden)
    );
    let panels = gp / NB;
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            let w = pack.as_ptr();
            let o = out.as_mut_ptr();
            // SAFETY: avx512f was detected; lengths were asserted above.
            unsafe {
                match s {
                    1 => avx512::matvec1(w, hidden, panels, init[0].as_ptr(), h[0].as_ptr(), o),
                    2 => avx512::matvec::<2>(w, hidden, panels, ptrs(init), ptrs(h), out_ptrs(o, gp)),
                    3 => avx512::matvec::<3>(w, hidden, panels, ptrs(init), ptrs(h), out_ptrs(o, gp)),
                    _ => avx512::matvec::<4>(w, hidden, panels, ptrs(init), ptrs(h), out_ptrs(o, gp)),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => {
            for (j, o) in out.chunks_exact_mut(gp).enumerate() {
                // SAFETY: avx2 and fma were detected; lengths were asserted above.
                unsafe {
                    avx2::matvec1(
                        pack.as_ptr(),
                        hidden,
                        panels,
                        init[j].as_ptr(),
                        h[j].as_ptr(),
                        o.as_mut_ptr(),
                    )
                }
            }
        }
        Isa::Portable => {
            for (j, o) in out.chunks_exact_mut(gp).enumerate() {
                portable_matvec1(pack, hidden, init[j], h[j], o);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn ptrs<const S: usize>(v: &[&[f32]]) -> [*const f32; S] {
    std::array::from_fn(|j| v[j].as_ptr())
}

#[cfg(target_arch = "x86_64")]
fn out_ptrs<const S: usize>(o: *mut f32, gp: usize) -> [*mut f32; S] {
    std::array::from_fn(|j| o.wrapping_add(j * gp))
}

fn portable_matvec1(pack: &[f32], hidden: usize, init: &[f32], h: &[f32], out: &mut [f32]) {
    for ((panel, init), out) in pack
        .chunks_exact(hidden * NB)
        .zip(init.chunks_exact(NB))
        .zip(out.chunks_exact_mut(NB))
    {
        let mut acc = [0.0f32; NB];
        acc.copy_from_slice(init);
        for (row, &x) in panel.chunks_exact(NB).zip(h) {
            for (a, &w) in acc.iter_mut().zip(row) {
                *a += x * w;
            }
        }
        out.copy_from_slice(&acc);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::NB;

    /// One sequence; two interleaved accumulator sets hide the FMA latency.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn matvec1(
        w: *const f32,
        hidden: usize,
        panels: usize,
        init: *const f32,
        h: *const f32,
        out: *mut f32,
    ) {
        for p in 0..panels {
            let wp = w.add(p * hidden * NB);
            let ip = init.add(p * NB);
            let mut a0 = _mm512_loadu_ps(ip);
            let mut a1 = _mm512_loadu_ps(ip.add(16));
            let mut a2 = _mm512_loadu_ps(ip.add(32));
            let mut a3 = _mm512_loadu_ps(ip.add(48));
            let mut b0 = _mm512_setzero_ps();
            let mut b1 = _mm512_setzero_ps();
            let mut b2 = _mm512_setzero_ps();
            let mut b3 = _mm512_setzero_ps();
            let mut k = 0;
            while k + 2 <= hidden {
                let r = wp.add(k * NB);
                let x0 = _mm512_set1_ps(*h.add(k));
                let x1 = _mm512_set1_ps(*h.add(k + 1));
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r), x0, a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(16)), x0, a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(32)), x0, a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(48)), x0, a3);
                b0 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(64)), x1, b0);
                b1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(80)), x1, b1);
                b2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(96)), x1, b2);
                b3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(112)), x1, b3);
                k += 2;
            }
            if k < hidden {
                let r = wp.add(k * NB);
                let x0 = _mm512_set1_ps(*h.add(k));
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r), x0, a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(16)), x0, a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(32)), x0, a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(r.add(48)), x0, a3);
            }
            let op = out.add(p * NB);
            _mm512_storeu_ps(op, _mm512_add_ps(a0, b0));
            _mm512_storeu_ps(op.add(16), _mm512_add_ps(a1, b1));
            _mm512_storeu_ps(op.add(32), _mm512_add_ps(a2, b2));
            _mm512_storeu_ps(op.add(48), _mm512_add_ps(a3, b3));
        }
    }

    /// `S` sequences share each load of the weights.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn matvec<const S: usize>(
        w: *const f32,
        hidden: usize,
        panels: usize,
        init: [*const f32; S],
        h: [*const f32; S],
        out: [*mut f32; S],
    ) {
        for p in 0..panels {
            let wp = w.add(p * hidden * NB);
            let mut acc = [[_mm512_setzero_ps(); 4]; S];
            for s in 0..S {
                for q in 0..4 {
                    acc[s][q] = _mm512_loadu_ps(init[s].add(p * NB + 16 * q));
                }
            }
            for k in 0..hidden {
                let r = wp.add(k * NB);
                let w0 = _mm512_loadu_ps(r);
                let w1 = _mm512_loadu_ps(r.add(16));
                let w2 = _mm512_loadu_ps(r.add(32));
                let w3 = _mm512_loadu_ps(r.add(48));
                for s in 0..S {
                    let x = _mm512_set1_ps(*h[s].add(k));
                    acc[s][0] = _mm512_fmadd_ps(w0, x, acc[s][0]);
                    acc[s][1] = _mm512_fmadd_ps(w1, x, acc[s][1]);
                    acc[s][2] = _mm512_fmadd_ps(w2, x, acc[s][2]);
                    acc[s][3] = _mm512_fmadd_ps(w3, x, acc[s][3]);
                }
            }
            for s in 0..S {
                for q in 0..4 {
                    _mm512_storeu_ps(out[s].add(p * NB + 16 * q), acc[s][q]);
                }
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
        super::cell_body(g, c, h)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::NB;

    /// One sequence, eight accumulators of eight lanes per panel.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn matvec1(
        w: *const f32,
        hidden: usize,
        panels: usize,
        init: *const f32,
        h: *const f32,
        out: *mut f32,
    ) {
        for p in 0..panels {
            let wp = w.add(p * hidden * NB);
            let ip = init.add(p * NB);
            let mut acc = [_mm256_setzero_ps(); 8];
            for (q, a) in acc.iter_mut().enumerate() {
                *a = _mm256_loadu_ps(ip.add(8 * q));
            }
            for k in 0..hidden {
                let r = wp.add(k * NB);
                let x = _mm256_set1_ps(*h.add(k));
                for (q, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(_mm256_loadu_ps(r.add(8 * q)), x, *a);
                }
            }
            let op = out.add(p * NB);
            for (q, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(op.add(8 * q), *a);
            }
        }
    }

    /// Writes the transpose of the 8x8 block at `src` (row stride `ss`) to `dst`
    /// (row stride `ds`).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose8(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        let r = |i: usize| _mm256_loadu_ps(src.add(i * ss));
        let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
        let t0 = _mm256_unpacklo_ps(r0, r1);
        let t1 = _mm256_unpackhi_ps(r0, r1);
        let t2 = _mm256_unpacklo_ps(r2, r3);
        let t3 = _mm256_unpackhi_ps(r2, r3);
        let t4 = _mm256_unpacklo_ps(r4, r5);
        let t5 = _mm256_unpackhi_ps(r4, r5);
        let t6 = _mm256_unpacklo_ps(r6, r7);
        let t7 = _mm256_unpackhi_ps(r6, r7);
        let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        _mm256_storeu_ps(dst, _mm256_permute2f128_ps::<0x20>(s0, s4));
        _mm256_storeu_ps(dst.add(ds), _mm256_permute2f128_ps::<0x20>(s1, s5));
        _mm256_storeu_ps(dst.add(2 * ds), _mm256_permute2f128_ps::<0x20>(s2, s6));
        _mm256_storeu_ps(dst.add(3 * ds), _mm256_permute2f128_ps::<0x20>(s3, s7));
        _mm256_storeu_ps(dst.add(4 * ds), _mm256_permute2f128_ps::<0x31>(s0, s4));
        _mm256_storeu_ps(dst.add(5 * ds), _mm256_permute2f128_ps::<0x31>(s1, s5));
        _mm256_storeu_ps(dst.add(6 * ds), _mm256_permute2f128_ps::<0x31>(s2, s6));
        _mm256_storeu_ps(dst.add(7 * ds), _mm256_permute2f128_ps::<0x31>(s3, s7));
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn cell(g: &[f32], c: &mut [f32], h: &mut [f32]) {
        super::cell_body(g, c, h)
    }
}

/// One LSTM cell update from pre-activation gates `[i | f | g | o]` (4H).
fn cell(isa: Isa, g: &[f32], c: &mut [f32], h: &mut [f32]) {
    match isa {
        // SAFETY: the instruction sets were detected before `isa` was chosen.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512::cell(g, c, h) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2::cell(g, c, h) },
        Isa::Portable => cell_body(g, c, h),
    }
}

/// Written to vectorise in whatever instruction set it is inlined into.
#[inline(always)]
fn cell_body(g: &[f32], c: &mut [f32], h: &mut [f32]) {
    let n = c.len();
    let h = &mut h[..n];
    let (gi, rest) = g[..4 * n].split_at(n);
    let (gf, rest) = rest.split_at(n);
    let (gg, go) = rest.split_at(n);
    for j in 0..n {
        let i = sigmoid(gi[j]);
        let f = sigmoid(gf[j]);
        let gv = tanh(gg[j]);
        let o = sigmoid(go[j]);
        let cn = f * c[j] + i * gv;
        c[j] = cn;
        h[j] = o * tanh(cn);
    }
}

/// `e^x` for `x` in [-88, 88] (NaN stays NaN): Cody-Waite reduction and the
/// Cephes `expf` polynomial, about 2 ulp.
#[inline(always)]
fn exp_reduced(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 1.5 * 2^23: adding it rounds to an integer kept in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits((ni.wrapping_add(127) << 23) as u32)
}

/// Logistic sigmoid, absolute error below 1e-6.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    // Clamp -x to [-40, 40] (sigmoid is within 5e-18 of 0 or 1 beyond); NaN passes.
    let z = if x > 40.0 {
        -40.0
    } else if x < -40.0 {
        40.0
    } else {
        -x
    };
    1.0 / (1.0 + exp_reduced(z))
}

/// Hyperbolic tangent, absolute error below 1e-6.
#[inline(always)]
fn tanh(x: f32) -> f32 {
    let z = if x > 20.0 {
        40.0
    } else if x < -20.0 {
        -40.0
    } else {
        2.0 * x
    };
    1.0 - 2.0 / (exp_reduced(z) + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::testing::Owned;

    // ---- data ---------------------------------------------------------------

    struct Rng(u64);

    impl Rng {
        /// Uniform in [-scale, scale).
        fn next(&mut self, scale: f32) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        }

        fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
            (0..n).map(|_| self.next(scale)).collect()
        }
    }

    #[derive(Clone, Debug)]
    struct Case {
        layers: usize,
        bidir: bool,
        batch_first: bool,
        b: usize,
        t: usize,
        i: usize,
        h: usize,
        lengths: Option<Vec<i64>>,
        state: bool,
        biases: bool,
        strided_x: bool,
    }

    impl Case {
        fn new(layers: usize, bidir: bool, batch_first: bool, b: usize, t: usize, i: usize, h: usize) -> Self {
            Case {
                layers,
                bidir,
                batch_first,
                b,
                t,
                i,
                h,
                lengths: None,
                state: false,
                biases: true,
                strided_x: false,
            }
        }

        fn cfg(&self) -> LstmConfig {
            LstmConfig {
                num_layers: self.layers,
                bidirectional: self.bidir,
                batch_first: self.batch_first,
                batch: self.b,
                seq_len: self.t,
                input_size: self.i,
                hidden_size: self.h,
            }
        }
    }

    struct Data {
        x: Vec<f32>,
        h0: Vec<f32>,
        c0: Vec<f32>,
        /// Per (layer, direction): w_ih, w_hh, b_ih, b_hh.
        params: Vec<[Vec<f32>; 4]>,
    }

    fn make_data(case: &Case, seed: u64) -> Data {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let cfg = case.cfg();
        let d = cfg.directions();
        let scale = 1.0 / (case.h as f32).sqrt();
        let x = rng.vec(case.b * case.t * case.i, 1.0);
        let h0 = rng.vec(case.layers * d * case.b * case.h, 0.5);
        let c0 = rng.vec(case.layers * d * case.b * case.h, 0.5);
        let params = (0..case.layers * d)
            .map(|k| {
                let in_l = cfg.layer_input_size(k / d);
                [
                    rng.vec(4 * case.h * in_l, scale),
                    rng.vec(4 * case.h * case.h, scale),
                    rng.vec(4 * case.h, scale),
                    rng.vec(4 * case.h, scale),
                ]
            })
            .collect();
        Data { x, h0, c0, params }
    }

    fn weights<'a>(case: &Case, data: &'a Data) -> Vec<LayerDirWeights<'a>> {
        data.params
            .iter()
            .map(|[w_ih, w_hh, b_ih, b_hh]| LayerDirWeights {
                w_ih,
                w_hh,
                b_ih: case.biases.then_some(&b_ih[..]),
                b_hh: case.biases.then_some(&b_hh[..]),
            })
            .collect()
    }

    // ---- the f64 reference ----------------------------------------------------

    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// Straight loops with torch's packed-sequence semantics. Returns y in the
    /// case's layout, h_n and c_n.
    fn reference(case: &Case, data: &Data) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (b_n, t_n, h_n_) = (case.b, case.t, case.h);
        let d_n = if case.bidir { 2 } else { 1 };
        let lens: Vec<usize> = match &case.lengths {
            Some(l) => l.iter().map(|&v| v as usize).collect(),
            None => vec![t_n; b_n],
        };
        let xrow = |b: usize, t: usize| if case.batch_first { b * t_n + t } else { t * b_n + b };
        // Batch-major layer input [b][t][feature].
        let mut inp: Vec<Vec<Vec<f64>>> = (0..b_n)
            .map(|b| {
                (0..t_n)
                    .map(|t| {
                        data.x[xrow(b, t) * case.i..][..case.i]
                            .iter()
                            .map(|&v| v as f64)
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let mut hn = vec![0.0f64; case.layers * d_n * b_n * h_n_];
        let mut cn = hn.clone();
        for l in 0..case.layers {
            let mut out = vec![vec![vec![0.0f64; d_n * h_n_]; t_n]; b_n];
            for d in 0..d_n {
                let [w_ih, w_hh, b_ih, b_hh] = &data.params[l * d_n + d];
                let in_l = inp[0][0].len();
                for b in 0..b_n {
                    let s = ((l * d_n + d) * b_n + b) * h_n_;
                    let (mut h, mut c) = if case.state {
                        (
                            data.h0[s..s + h_n_].iter().map(|&v| v as f64).collect::<Vec<_>>(),
                            data.c0[s..s + h_n_].iter().map(|&v| v as f64).collect::<Vec<_>>(),
                        )
                    } else {
                        (vec![0.0; h_n_], vec![0.0; h_n_])
                    };
                    let steps: Vec<usize> = if d == 0 {
                        (0..lens[b]).collect()
                    } else {
                        (0..lens[b]).rev().collect()
                    };
                    for t in steps {
                        let mut gates = vec![0.0f64; 4 * h_n_];
                        for (r, gate) in gates.iter_mut().enumerate() {
                            let mut acc = if case.biases {
                                b_ih[r] as f64 + b_hh[r] as f64
                            } else {
                                0.0
                            };
                            for k in 0..in_l {
                                acc += w_ih[r * in_l + k] as f64 * inp[b][t][k];
                            }
                            for k in 0..h_n_ {
                                acc += w_hh[r * h_n_ + k] as f64 * h[k];
                            }
                            *gate = acc;
                        }
                        for j in 0..h_n_ {
                            let i = sig(gates[j]);
                            let f = sig(gates[h_n_ + j]);
                            let g = gates[2 * h_n_ + j].tanh();
                            let o = sig(gates[3 * h_n_ + j]);
                            c[j] = f * c[j] + i * g;
                            h[j] = o * c[j].tanh();
                        }
                        out[b][t][d * h_n_..(d + 1) * h_n_].copy_from_slice(&h);
                    }
                    hn[s..s + h_n_].copy_from_slice(&h);
                    cn[s..s + h_n_].copy_from_slice(&c);
                }
            }
            inp = out;
        }
        let dh = d_n * h_n_;
        let mut y = vec![0.0f64; b_n * t_n * dh];
        for b in 0..b_n {
            for t in 0..t_n {
                y[xrow(b, t) * dh..][..dh].copy_from_slice(&inp[b][t]);
            }
        }
        (y, hn, cn)
    }

    // ---- running a case -------------------------------------------------------

    fn max_err(got: &[f32], want: &[f64]) -> f64 {
        assert_eq!(got.len(), want.len());
        got.iter()
            .zip(want)
            .map(|(&g, &w)| (g as f64 - w).abs())
            .fold(0.0, f64::max)
    }

    fn check_padding_is_zero(case: &Case, y: &[f32]) {
        let Some(lens) = &case.lengths else { return };
        let dh = case.h * if case.bidir { 2 } else { 1 };
        for (b, &len) in lens.iter().enumerate() {
            for t in len as usize..case.t {
                let r = if case.batch_first {
                    b * case.t + t
                } else {
                    t * case.b + b
                };
                assert!(
                    y[r * dh..(r + 1) * dh].iter().all(|&v| v == 0.0),
                    "{case:?}: y[b={b}, t={t}] is not zero"
                );
            }
        }
    }

    /// Through the registered packed function, with every ISA through the plain
    /// Rust entry point, against the reference.
    fn check(case: &Case) {
        let data = make_data(case, case.t as u64 * 31 + case.b as u64);
        let (want_y, want_hn, want_cn) = reference(case, &data);
        let cfg = case.cfg();
        let d = cfg.directions();
        let ny = case.b * case.t * d * case.h;
        let ns = case.layers * d * case.b * case.h;

        // Packed call, through a `Function` as TVM would make it.
        let (y, hn, cn) = {
            let xs = if case.batch_first {
                [case.b, case.t, case.i]
            } else {
                [case.t, case.b, case.i]
            };
            let xs = xs.map(|v| v as i64);
            let mut x = if case.strided_x {
                // Same logical tensor with the last axis stored in reverse order
                // inside a buffer twice as wide, one element in.
                let (a0, a1, a2) = (xs[0] as usize, xs[1] as usize, xs[2] as usize);
                let mut buf = vec![f32::NAN; 1 + a0 * a1 * 2 * a2];
                for p in 0..a0 * a1 {
                    for k in 0..a2 {
                        buf[1 + p * 2 * a2 + (a2 - 1 - k)] = data.x[p * a2 + k];
                    }
                }
                let strides = [(a1 * 2 * a2) as i64, (2 * a2) as i64, -1];
                Owned::strided(buf, &xs, &strides, 4 * a2 as u64)
            } else {
                Owned::new(data.x.clone(), &xs)
            };
            let sshape = [(case.layers * d) as i64, case.b as i64, case.h as i64];
            let mut lengths = case.lengths.clone().map(|l| Owned::new(l, &[case.b as i64]));
            let mut h0 = Owned::new(data.h0.clone(), &sshape);
            let mut c0 = Owned::new(data.c0.clone(), &sshape);
            let mut params: Vec<Owned<f32>> = Vec::new();
            for (k, [w_ih, w_hh, b_ih, b_hh]) in data.params.iter().enumerate() {
                let g4 = 4 * case.h as i64;
                params.push(Owned::new(w_ih.clone(), &[g4, cfg.layer_input_size(k / d) as i64]));
                params.push(Owned::new(w_hh.clone(), &[g4, case.h as i64]));
                if case.biases {
                    params.push(Owned::new(b_ih.clone(), &[g4]));
                    params.push(Owned::new(b_hh.clone(), &[g4]));
                }
            }
            let ys = if case.batch_first {
                [case.b, case.t, d * case.h]
            } else {
                [case.t, case.b, d * case.h]
            };
            let mut y = Owned::new(vec![f32::NAN; ny], &ys.map(|v| v as i64));
            let mut hn = Owned::new(vec![f32::NAN; ns], &sshape);
            let mut cn = Owned::new(vec![f32::NAN; ns], &sshape);

            let ints: Vec<i64> = vec![
                case.layers as i64,
                case.bidir as i64,
                case.batch_first as i64,
                case.biases as i64,
                case.lengths.is_some() as i64,
                case.state as i64,
            ];
            let mut views: Vec<TensorView> = vec![x.view()];
            if let Some(l) = &mut lengths {
                views.push(l.view());
            }
            if case.state {
                views.push(h0.view());
                views.push(c0.view());
            }
            for p in &mut params {
                views.push(p.view());
            }
            views.push(y.view());
            views.push(hn.view());
            views.push(cn.view());
            let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
            args.extend(views.iter().map(AnyView::from));
            function()
                .call_packed(&args)
                .unwrap_or_else(|e| panic!("{case:?}: {}", e.message()));
            (y.data, hn.data, cn.data)
        };
        let tol = 1e-5;
        let errs = [max_err(&y, &want_y), max_err(&hn, &want_hn), max_err(&cn, &want_cn)];
        assert!(
            errs.iter().all(|&e| e < tol),
            "{case:?}: packed max errors y/h_n/c_n {errs:?}"
        );
        check_padding_is_zero(case, &y);

        // Every instruction set through the plain entry point.
        let w = weights(case, &data);
        let lens = case.lengths.as_deref();
        let state = case.state.then_some((&data.h0[..], &data.c0[..]));
        for isa in Isa::available() {
            let mut y = vec![f32::NAN; ny];
            let mut hn = vec![f32::NAN; ns];
            let mut cn = vec![f32::NAN; ns];
            forward_with(isa, &cfg, &data.x, lens, state, &w, &mut y, &mut hn, &mut cn).unwrap();
            let errs = [max_err(&y, &want_y), max_err(&hn, &want_hn), max_err(&cn, &want_cn)];
            assert!(
                errs.iter().all(|&e| e < tol),
                "{case:?} {isa:?}: max errors y/h_n/c_n {errs:?}"
            );
            check_padding_is_zero(case, &y);
        }
    }

    // ---- accuracy ---------------------------------------------------------------

    #[test]
    fn activations_are_within_1e_6_of_f64() {
        let mut worst = (0.0f64, 0.0f64);
        let mut x = -60.0f32;
        while x <= 60.0 {
            let xd = x as f64;
            let es = (sigmoid(x) as f64 - sig(xd)).abs();
            let et = (tanh(x) as f64 - xd.tanh()).abs();
            worst = (worst.0.max(es), worst.1.max(et));
            x += 0.000_37;
        }
        assert!(worst.0 < 1e-6 && worst.1 < 1e-6, "sigmoid/tanh max abs error {worst:?}");
        for v in [
            0.0f32,
            1e-30,
            -1e-30,
            1e-7,
            f32::MIN_POSITIVE,
            1e30,
            -1e30,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert!((sigmoid(v) as f64 - sig(v as f64)).abs() < 1e-6, "sigmoid({v})");
            assert!((tanh(v) as f64 - (v as f64).tanh()).abs() < 1e-6, "tanh({v})");
        }
        assert!(sigmoid(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
    }

    #[test]
    fn packing_agrees_across_instruction_sets() {
        for hidden in [1usize, 3, 8, 9, 16, 17, 24] {
            let gp = (4 * hidden).div_ceil(NB) * NB;
            let w = Rng(hidden as u64 + 1).vec(4 * hidden * hidden, 1.0);
            for isa in Isa::available() {
                let packed = pack_recurrent(isa, &w, hidden, gp);
                for p in 0..gp / NB {
                    for k in 0..hidden {
                        for c in 0..NB {
                            let r = p * NB + c;
                            let want = if r < 4 * hidden { w[r * hidden + k] } else { 0.0 };
                            assert_eq!(
                                packed[(p * hidden + k) * NB + c],
                                want,
                                "{isa:?} hidden {hidden} p {p} k {k} c {c}"
                            );
                        }
                    }
                }
            }
        }
    }

    // ---- cases --------------------------------------------------------------------

    #[test]
    fn single_layer_unidirectional() {
        check(&Case::new(1, false, true, 1, 5, 3, 4));
        check(&Case::new(1, false, false, 1, 5, 3, 4));
    }

    #[test]
    fn single_step() {
        check(&Case::new(1, true, true, 1, 1, 4, 3));
        check(&Case {
            state: true,
            ..Case::new(2, true, false, 3, 1, 2, 5)
        });
    }

    #[test]
    fn layers_and_directions() {
        for layers in 1..=3 {
            for bidir in [false, true] {
                for batch_first in [false, true] {
                    check(&Case::new(layers, bidir, batch_first, 2, 4, 5, 6));
                }
            }
        }
    }

    #[test]
    fn mixed_lengths() {
        for bidir in [false, true] {
            for batch_first in [false, true] {
                for state in [false, true] {
                    let case = Case {
                        lengths: Some(vec![5, 1, 3, 5]),
                        state,
                        ..Case::new(2, bidir, batch_first, 4, 5, 3, 7)
                    };
                    check(&case);
                }
            }
        }
        // More sequences than one recurrent group holds, all lengths different,
        // and a hidden size whose 4H is not a multiple of the panel width.
        check(&Case {
            lengths: Some(vec![2, 7, 1, 6, 3, 5, 4]),
            state: true,
            ..Case::new(3, true, false, 7, 7, 4, 9)
        });
        check(&Case {
            lengths: Some(vec![1]),
            ..Case::new(1, true, true, 1, 4, 3, 2)
        });
    }

    #[test]
    fn state_and_biases() {
        for state in [false, true] {
            for biases in [false, true] {
                check(&Case {
                    state,
                    biases,
                    ..Case::new(2, true, true, 3, 3, 4, 5)
                });
            }
        }
    }

    #[test]
    fn strided_input() {
        check(&Case {
            strided_x: true,
            ..Case::new(2, true, false, 2, 3, 4, 5)
        });
        check(&Case {
            strided_x: true,
            lengths: Some(vec![3, 2]),
            ..Case::new(1, false, true, 2, 3, 4, 5)
        });
    }

    #[test]
    fn any_number_of_threads() {
        // 1 thread: every shape runs fused; 3 threads: most run in phases.
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                check(&Case {
                    lengths: Some(vec![2, 4, 1]),
                    state: true,
                    ..Case::new(2, true, false, 3, 4, 3, 5)
                });
                check(&Case {
                    lengths: Some(vec![3, 1]),
                    ..Case::new(2, false, true, 2, 3, 2, 4)
                });
                check(&Case::new(1, false, true, 1, 40, 3, 4));
            });
        }
    }

    #[test]
    fn kokoro_size() {
        check(&Case {
            state: true,
            ..Case::new(1, true, true, 1, 7, 640, 256)
        });
    }

    #[test]
    fn empty_batch_is_fine() {
        let cfg = Case::new(1, true, true, 0, 3, 2, 2).cfg();
        let data = make_data(&Case::new(1, true, true, 0, 3, 2, 2), 1);
        let case = Case::new(1, true, true, 0, 3, 2, 2);
        lstm_forward(&cfg, &[], None, None, &weights(&case, &data), &mut [], &mut [], &mut []).unwrap();
    }

    // ---- bad input ------------------------------------------------------------------

    enum Arg {
        F(Owned<f32>),
        I(Owned<i64>),
    }

    impl Arg {
        fn view(&mut self) -> TensorView {
            match self {
                Arg::F(o) => o.view(),
                Arg::I(o) => o.view(),
            }
        }
    }

    fn f(data: Vec<f32>, shape: &[i64]) -> Arg {
        Arg::F(Owned::new(data, shape))
    }

    fn i(data: Vec<i64>, shape: &[i64]) -> Arg {
        Arg::I(Owned::new(data, shape))
    }

    /// A valid uni-directional 2-layer call (B=2, T=3, I=4, H=2) with lengths and
    /// biases. Tensors: 0 x, 1 lengths, 2-5 layer 0 (w_ih, w_hh, b_ih, b_hh),
    /// 6-9 layer 1, 10 y, 11 h_n, 12 c_n. `edit` may change anything first.
    fn call_with(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> (Result<Any>, Vec<Arg>) {
        call_with_views(edit, |_| {})
    }

    /// As [`call_with`], and `edit_views` may then rearrange the tensor views.
    fn call_with_views(
        edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>),
        edit_views: impl FnOnce(&mut Vec<TensorView>),
    ) -> (Result<Any>, Vec<Arg>) {
        let mut ints = vec![2i64, 0, 1, 1, 1, 0];
        let mut t = vec![f(vec![0.5; 24], &[2, 3, 4]), i(vec![3, 2], &[2])];
        for l in 0..2 {
            let in_l = if l == 0 { 4 } else { 2 };
            t.push(f(vec![0.1; 8 * in_l], &[8, in_l as i64]));
            t.push(f(vec![0.1; 16], &[8, 2]));
            t.push(f(vec![0.0; 8], &[8]));
            t.push(f(vec![0.0; 8], &[8]));
        }
        t.push(f(vec![f32::NAN; 12], &[2, 3, 2]));
        t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
        t.push(f(vec![f32::NAN; 8], &[2, 2, 2]));
        edit(&mut ints, &mut t);
        let mut views: Vec<TensorView> = t.iter_mut().map(|o| o.view()).collect();
        edit_views(&mut views);
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        let r = function().call_packed(&args);
        (r, t)
    }

    fn failure(r: Result<Any>) -> tvm_ffi::Error {
        match r {
            Ok(_) => panic!("the call should fail"),
            Err(e) => e,
        }
    }

    fn error_of(edit: impl FnOnce(&mut Vec<i64>, &mut Vec<Arg>)) -> tvm_ffi::Error {
        failure(call_with(edit).0)
    }

    fn assert_msg(err: &tvm_ffi::Error, kind: tvm_ffi::ErrorKind, needle: &str) {
        assert!(err.message().starts_with("lstm: "), "{}", err.message());
        assert!(err.message().contains(needle), "{:?} lacks {needle:?}", err.message());
        assert_eq!(err.kind(), kind, "{}", err.message());
    }

    #[test]
    fn the_valid_baseline_call_succeeds() {
        let (r, t) = call_with(|_, _| {});
        r.unwrap();
        let Arg::F(y) = &t[10] else { unreachable!() };
        assert!(y.data.iter().all(|v| v.is_finite()));
        // Sequence 1 has length 2: its step 2 is zero.
        assert!(y.data[(3 + 2) * 2..].iter().all(|&v| v == 0.0));
        assert!(y.data[..(3 + 2) * 2].iter().all(|&v| v != 0.0));
    }

    #[test]
    fn wrong_dtype_is_a_type_error() {
        let err = error_of(|_, t| t[3] = i(vec![0; 16], &[8, 2]));
        assert_msg(
            &err,
            TYPE_ERROR,
            "lstm: w_hh[layer 0, forward]: expected dtype float32, got int64",
        );
        let err = error_of(|_, t| t[1] = f(vec![3.0, 2.0], &[2]));
        assert_msg(&err, TYPE_ERROR, "lstm: lengths: expected dtype int64, got float32");
        let err = error_of(|_, t| t[0] = i(vec![0; 24], &[2, 3, 4]));
        assert_msg(&err, TYPE_ERROR, "lstm: x: expected dtype float32, got int64");
    }

    #[test]
    fn wrong_weight_shape_names_the_weight() {
        let err = error_of(|_, t| t[7] = f(vec![0.1; 24], &[8, 3]));
        assert_msg(
            &err,
            VALUE_ERROR,
            "lstm: w_hh[layer 1, forward]: expected shape [8, 2], got [8, 3]",
        );
        let err = error_of(|_, t| t[2] = f(vec![0.1; 40], &[8, 5]));
        assert_msg(
            &err,
            VALUE_ERROR,
            "lstm: w_ih[layer 0, forward]: expected shape [8, 4], got [8, 5]",
        );
        let err = error_of(|_, t| t[5] = f(vec![0.0; 4], &[4]));
        assert_msg(
            &err,
            VALUE_ERROR,
            "lstm: b_hh[layer 0, forward]: expected shape [8], got [4]",
        );
        let err = error_of(|_, t| t[10] = f(vec![0.0; 12], &[3, 2, 2]));
        assert_msg(&err, VALUE_ERROR, "lstm: y: expected shape [2, 3, 2], got [3, 2, 2]");
        let err = error_of(|_, t| t[11] = f(vec![0.0; 4], &[2, 2]));
        assert_msg(&err, VALUE_ERROR, "lstm: h_n: expected rank 3, got rank 2");
    }

    #[test]
    fn lengths_out_of_range_are_refused() {
        let err = error_of(|_, t| t[1] = i(vec![3, 0], &[2]));
        assert_msg(&err, VALUE_ERROR, "lstm: lengths[1] = 0 is out of range 1..=3");
        let err = error_of(|_, t| t[1] = i(vec![4, 2], &[2]));
        assert_msg(&err, VALUE_ERROR, "lstm: lengths[0] = 4 is out of range 1..=3");
        let err = error_of(|_, t| t[1] = i(vec![3, 2, 1], &[3]));
        assert_msg(&err, VALUE_ERROR, "lstm: lengths: expected shape [2], got [3]");
    }

    #[test]
    fn flags_and_argument_count_are_checked() {
        let err = error_of(|ints, _| ints[4] = 0);
        assert_msg(&err, VALUE_ERROR, "lstm: expected 18 arguments for num_layers=2");
        let err = error_of(|_, t| {
            t.pop();
        });
        assert_msg(&err, VALUE_ERROR, "lstm: expected 19 arguments for num_layers=2, bidirectional=0, has_biases=1, has_lengths=1, has_state=0, got 18");
        let err = error_of(|ints, _| ints[1] = 2);
        assert_msg(&err, VALUE_ERROR, "lstm: bidirectional: expected 0 or 1, got 2");
        let err = error_of(|ints, _| ints[0] = 0);
        assert_msg(&err, VALUE_ERROR, "lstm: num_layers: expected a value >= 1, got 0");
        let err = failure(function().call_packed(&[AnyView::from(&1i64)]));
        assert_msg(&err, VALUE_ERROR, "lstm: expected at least 6 arguments");
        let one = 1i64;
        let mut x = Owned::new(vec![0.0f32; 2], &[1, 1, 2]);
        let xv = x.view();
        let args = [
            AnyView::from(&one),
            AnyView::from(&0i64),
            AnyView::from(&0i64),
            AnyView::from(&0i64),
            AnyView::from(&0i64),
            AnyView::from(&0i64),
            AnyView::from(&one),
            AnyView::from(&xv),
            AnyView::from(&xv),
            AnyView::from(&xv),
            AnyView::from(&xv),
            AnyView::from(&xv),
        ];
        let err = failure(function().call_packed(&args));
        assert_msg(&err, TYPE_ERROR, "lstm: x: expected a tensor");
    }

    #[test]
    fn time_zero_and_aliasing_are_refused() {
        // T = 0.
        let err = error_of(|_, t| t[0] = f(vec![], &[2, 0, 4]));
        assert_msg(&err, VALUE_ERROR, "lstm: x: the sequence length must be at least 1");
        // The same tensor as h_n and c_n, or as an input and an output.
        let err = failure(call_with_views(|_, _| {}, |v| v[12] = v[11]).0);
        assert_msg(&err, VALUE_ERROR, "lstm: h_n: output memory overlaps output c_n");
        let with_state = |ints: &mut Vec<i64>, t: &mut Vec<Arg>| {
            ints[5] = 1;
            t.insert(2, f(vec![0.0; 8], &[2, 2, 2]));
            t.insert(3, f(vec![0.0; 8], &[2, 2, 2]));
        };
        call_with(with_state).0.unwrap();
        let err = failure(call_with_views(with_state, |v| v[13] = v[2]).0);
        assert_msg(&err, VALUE_ERROR, "lstm: h_n: output memory overlaps input h0");
        // Plain entry point: a buffer of the wrong size.
        let case = Case::new(1, false, true, 1, 2, 2, 2);
        let data = make_data(&case, 3);
        let w = weights(&case, &data);
        let mut y = vec![0.0; 3];
        let (mut hn, mut cn) = (vec![0.0; 2], vec![0.0; 2]);
        let err = lstm_forward(&case.cfg(), &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap_err();
        assert_msg(&err, VALUE_ERROR, "lstm: y: expected 4 elements");
    }

    /// Timing at Kokoro's shape (I=640, H=256, bidirectional, B=1), not a check:
    /// `RAYON_NUM_THREADS=2 cargo test -p tvm-ext --release -- --ignored --nocapture
    /// --test-threads=1 timing` (`LSTM_T=32,512` and `LSTM_REPS=100` to vary it).
    #[test]
    #[ignore]
    fn timing_kokoro_shape() {
        let ts: Vec<usize> = match std::env::var("LSTM_T") {
            Ok(v) => v.split(',').map(|t| t.parse().unwrap()).collect(),
            Err(_) => vec![32, 128, 512],
        };
        for t in ts {
            let case = Case::new(1, true, true, 1, t, 640, 256);
            let data = make_data(&case, 7);
            let w = weights(&case, &data);
            let cfg = case.cfg();
            let mut y = vec![0.0; t * 512];
            let (mut hn, mut cn) = (vec![0.0; 512], vec![0.0; 512]);
            let mut times = Vec::new();
            let reps: usize = std::env::var("LSTM_REPS").map_or(23, |v| v.parse().unwrap());
            for _ in 0..reps {
                let start = std::time::Instant::now();
                lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap();
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
            let mut sorted = times[3..].to_vec();
            sorted.sort_by(f64::total_cmp);
            println!(
                "I=640 H=256 bidir B=1 T={t}: min {:.2} p10 {:.2} median {:.2} ms",
                sorted[0],
                sorted[sorted.len() / 10],
                sorted[sorted.len() / 2],
            );
        }
    }

    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let case = Case::new(1, false, true, 1, 2, 2, 2);
        let data = make_data(&case, 3);
        let w = weights(&case, &data);
        let (mut y, mut hn, mut cn) = (vec![0.0; 4], vec![0.0; 2], vec![0.0; 2]);
        for cfg in [
            LstmConfig {
                num_layers: usize::MAX,
                ..case.cfg()
            },
            LstmConfig {
                hidden_size: usize::MAX / 2,
                ..case.cfg()
            },
            LstmConfig {
                batch: usize::MAX / 3,
                seq_len: usize::MAX / 3,
                ..case.cfg()
            },
            LstmConfig {
                num_layers: 0,
                ..case.cfg()
            },
            LstmConfig {
                hidden_size: 0,
                ..case.cfg()
            },
        ] {
            let err = lstm_forward(&cfg, &data.x, None, None, &w, &mut y, &mut hn, &mut cn).unwrap_err();
            assert_eq!(err.kind(), VALUE_ERROR);
            assert!(err.message().starts_with("lstm: "), "{}", err.message());
        }
    }
}
