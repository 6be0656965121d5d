//! The `precision="bf16"` kernels: conv1d, conv1d_transpose and matmul with
//! weights packed to bf16 once, at compile time, and inputs rounded to bf16 per
//! call; products accumulate in f32 (the GEMM of `gemm_bf16.rs`). Same
//! semantics and argument checks as the f32 kernels (`conv/`, `matmul.rs`,
//! whose parsing they share), only `w` differs.
//!
//! ```text
//! kokoro_tvm_ext.pack_bf16(kind: "conv1d" | "conv1d_transpose" | "matmul", groups >= 1,
//!                          w: float32) -> bfloat16 tensor, the packed operand per group:
//!   conv1d            w [Cout, Cin/g, K] -> [g, ceil(Cout/g / MR), ceil(Cin/g*K / 2), MR, 2]
//!   conv1d_transpose  w [Cin, Cout/g, K] -> [g, ceil(Cout/g*K / NR), ceil(Cin/g / 2), NR, 2]
//!   matmul            w [K, N]           -> [1, ceil(N / NR), ceil(K / 2), NR, 2]   (groups = 1)
//!
//! kokoro_tvm_ext.conv1d_bf16(stride, pad_left, pad_right, dilation, groups, has_bias,
//!                            kernel_size, x, w_packed, [bias], OUT out)
//! kokoro_tvm_ext.conv1d_transpose_bf16(stride, pad_left, pad_right, output_padding, dilation,
//!                            groups, has_bias, kernel_size, x, w_packed, [bias], OUT out)
//! kokoro_tvm_ext.matmul_bf16(has_bias, x, w_packed, [bias], OUT out)
//!   x, bias, out: float32 as for the f32 kernels; the output channels (N) come from out.
//!
//! kokoro_tvm_ext.bf16_native() -> bool: whether the bf16 kernels compute in bf16 here.
//! ```
//!
//! Where the CPU lacks AVX512-BF16, or `KOKORO_TVM_EXT_NO_BF16=1`, the kernels
//! unpack the weights to f32 and run the f32 kernels: the same results up to
//! the rounding of the inputs, which then stay f32.
//!
//! How they run: conv1d packs each im2col tile straight into bf16 pairs (two
//! rows at a time) and multiplies the packed weights by it, the tiles split
//! over the threads as in `conv/`. conv1d_transpose packs `x^T` per tile and
//! multiplies it by its job's panels of packed weights, then scatters (col2im).
//! matmul packs `x` once and splits the output over the threads.
use std::borrow::Cow;

use tvm_ffi::{bail, ensure, Any, AnyView, Function, Result, Tensor, TensorView, VALUE_ERROR};

use crate::args::Cursor;
use crate::conv::{
    call_data, col2im, conv1d_forward, conv1d_transpose_forward, fill_bias, im2col_row, parse_call,
    run_jobs, Conv1dConfig, ConvCall, Plan, Tuning, WeightKind, TUNING,
};
use crate::gemm::{threads, SharedMut};
use crate::gemm_bf16::{
    as_u32, gemm_bf16, gemm_bf16_shared, isa, native_bf16, pack_a, pack_b, pack_pair, pairs,
    unpack_a_into, unpack_b_into, PackedA, PackedB, MR, NR,
};
use crate::interface;
use crate::job::{internal, JobError};
use crate::matmul::{self, matmul_forward};
use crate::scratch::Scratch;
use crate::tensor::{dim, expect_shape, input, shape_of, Bf16};

// ---------------------------------------------------------------------------
// Packing the weights.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.pack_bf16`.
pub fn pack_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> { Ok(Any::from(pack_packed(args)?)) })
}

/// The registered `kokoro_tvm_ext.bf16_native`.
pub fn native_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        Cursor::new(&interface::BF16_NATIVE, args)?.finish()?;
        Ok(Any::from(native_bf16()))
    })
}

/// What a packed weight tensor holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Conv1d,
    Conv1dTranspose,
    Matmul,
}

/// The packed shape of weights `w_shape` (torch's layout) for `kind`.
pub fn packed_shape(kind: Kind, groups: usize, w_shape: &[usize]) -> Vec<i64> {
    let (panels, kp, width) = match (kind, w_shape) {
        (Kind::Conv1d, &[cout, cin_g, k]) => ((cout / groups).div_ceil(MR), pairs(cin_g * k), MR),
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
    let mut c = Cursor::new(&interface::PACK_BF16, args)?;
    let kind = match c.string("kind")?.as_str() {
        "conv1d" => Kind::Conv1d,
        "conv1d_transpose" => Kind::Conv1dTranspose,
        "matmul" => Kind::Matmul,
        other => bail!(
            VALUE_ERROR,
            "{WHO}: kind: expected \"conv1d\", \"conv1d_transpose\" or \"matmul\", got {other:?}"
        ),
    };
    let groups = c.int_in("groups", 1, i32::MAX as i64)? as usize;
    let w = c.tensor("w")?;
    c.finish()?;
    let rank = if kind == Kind::Matmul { 2 } else { 3 };
    let ws: Vec<usize> = shape_of(&w, "pack_bf16: w", rank)?
        .iter()
        .map(|&d| dim(d))
        .collect();
    ensure!(
        ws.iter().all(|&d| d > 0),
        VALUE_ERROR,
        "{WHO}: w: expected no empty dimension, got shape {ws:?}"
    );
    let split = match kind {
        Kind::Conv1d | Kind::Conv1dTranspose => ws[0],
        Kind::Matmul => {
            ensure!(
                groups == 1,
                VALUE_ERROR,
                "{WHO}: groups: matmul weights have one group, got {groups}"
            );
            1
        }
    };
    ensure!(
        split.is_multiple_of(groups),
        VALUE_ERROR,
        "{WHO}: groups: {groups} does not divide the {split} channels of w's first dimension"
    );
    let wd = input::<f32>(&w, "pack_bf16: w")?;
    let shape = packed_shape(kind, groups, &ws);
    let per_group = (shape[1] * shape[2] * shape[3]) as usize;
    let mut packed = vec![0u32; groups * per_group];
    for (gi, dst) in packed.chunks_exact_mut(per_group).enumerate() {
        let r = match kind {
            Kind::Conv1d => {
                // Rows: the group's output channels; inner: (c, tap).
                let (cout_g, kc) = (ws[0] / groups, ws[1] * ws[2]);
                let w = &wd[gi * cout_g * kc..][..cout_g * kc];
                pack_a(cout_g, kc, |o, r| w[o * kc + r], dst)
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

/// The packed weights of a call as `u32` pairs, after checking their shape.
fn packed_weights<'a>(who: &str, w: &TensorView, shape: &[i64]) -> Result<Cow<'a, [u32]>> {
    if let Err(e) = expect_shape(w, &format!("{who}: w"), shape) {
        bail!(
            VALUE_ERROR,
            "{} (weights packed by kokoro_tvm_ext.pack_bf16)",
            e.message()
        );
    }
    let data: Cow<'a, [Bf16]> = input::<Bf16>(w, &format!("{who}: w"))?;
    Ok(match data {
        Cow::Borrowed(s) if (s.as_ptr() as usize).is_multiple_of(4) => {
            // SAFETY: 4-byte aligned, an even number of u16s (the last dimension is 2).
            Cow::Borrowed(unsafe {
                std::slice::from_raw_parts(s.as_ptr() as *const u32, s.len() / 2)
            })
        }
        s => Cow::Owned(
            s.chunks_exact(2)
                .map(|p| p[0].0 as u32 | (p[1].0 as u32) << 16)
                .collect(),
        ),
    })
}

/// Where bf16 is not native: `run` on the weights unpacked to f32 by `unpack`,
/// in a pooled buffer (a fresh buffer per call, filled serially, was a tenth of
/// a short synthesis in page faults and unpacking).
fn with_f32_weights<R>(
    len: usize,
    unpack: impl FnOnce(&mut [f32]),
    run: impl FnOnce(&[f32]) -> R,
) -> R {
    let mut weights = Scratch::new();
    weights.set_len(len);
    unpack(&mut weights);
    run(&weights)
}

// ---------------------------------------------------------------------------
// conv1d.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.conv1d_bf16`.
pub fn conv1d_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        conv_packed(args, false)?;
        Ok(Any::default())
    })
}

/// The registered `kokoro_tvm_ext.conv1d_transpose_bf16`.
pub fn conv1d_transpose_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        conv_packed(args, true)?;
        Ok(Any::default())
    })
}

fn conv_packed(args: &[AnyView], transpose: bool) -> Result<()> {
    let iface = if transpose {
        &interface::CONV1D_TRANSPOSE_BF16
    } else {
        &interface::CONV1D_BF16
    };
    let who = iface.name;
    let call: ConvCall = parse_call(iface, args, transpose, WeightKind::Bf16)?;
    let cfg = &call.cfg;
    let (kind, w_shape) = if transpose {
        (
            Kind::Conv1dTranspose,
            [cfg.in_channels, cfg.out_channels / cfg.groups, cfg.kernel],
        )
    } else {
        (
            Kind::Conv1d,
            [cfg.out_channels, cfg.in_channels / cfg.groups, cfg.kernel],
        )
    };
    let w = packed_weights(who, &call.t.w, &packed_shape(kind, cfg.groups, &w_shape))?;
    let (x, bias, out) = call_data(who, &call)?;
    conv_bf16_forward(cfg, transpose, &x, &w, bias.as_deref(), out)
}

/// conv1d (or with `transpose`, conv1d_transpose) on dense buffers with packed
/// weights `w` (as `u32` pairs); the f32 kernels on the unpacked weights where
/// bf16 is not native.
pub fn conv_bf16_forward(
    cfg: &Conv1dConfig,
    transpose: bool,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let who = if transpose {
        "conv1d_transpose_bf16"
    } else {
        "conv1d_bf16"
    };
    let lout = if transpose {
        cfg.transpose_out_len()
    } else {
        cfg.conv_out_len()
    };
    let Some(lout) = lout else {
        bail!(VALUE_ERROR, "{who}: the output would be empty for {cfg:?}");
    };
    let (g, k) = (cfg.groups, cfg.kernel);
    let (cin_g, cout_g) = (cfg.in_channels / g, cfg.out_channels / g);
    let len = |dims: &[usize]| dims.iter().product::<usize>();
    let per_group = if transpose {
        PackedB::len(cin_g, cout_g * k)
    } else {
        PackedA::len(cout_g, cin_g * k)
    };
    ensure!(
        x.len() == len(&[cfg.batch, cfg.in_channels, cfg.length])
            && w.len() == g * per_group
            && bias.is_none_or(|b| b.len() == cfg.out_channels)
            && out.len() == len(&[cfg.batch, cfg.out_channels, lout]),
        VALUE_ERROR,
        "{who}: buffer lengths do not match {cfg:?}"
    );
    if !native_bf16() {
        let group_len = cin_g * cout_g * k;
        let unpack = |f32_w: &mut [f32]| {
            for (p, dst) in w
                .chunks_exact(per_group.max(1))
                .zip(f32_w.chunks_exact_mut(group_len.max(1)))
            {
                if transpose {
                    unpack_b_into(p, cin_g, cout_g * k, dst)
                } else {
                    unpack_a_into(p, cout_g, cin_g * k, dst)
                }
            }
        };
        return with_f32_weights(g * group_len, unpack, |f32_w| {
            if transpose {
                conv1d_transpose_forward(cfg, x, f32_w, bias, out)
            } else {
                conv1d_forward(cfg, x, f32_w, bias, out)
            }
        });
    }
    let r = if transpose {
        transpose_bf16(cfg, lout, x, w, bias, out, TUNING)
    } else {
        conv_bf16(cfg, lout, x, w, bias, out, TUNING.tile_bytes)
    };
    r.map_err(|e| internal(who, e))
}

/// Tiles as in `conv/` (a packed tile holds a pair per column and pair of
/// rows, so it is as wide as an f32 tile of half the rows), rounded to whole
/// panels of [`NR`] columns.
fn conv_bf16(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tile_bytes: usize,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let kc = cin_g * k;
    let kp = pairs(kc);
    let a_len = PackedA::len(cout_g, kc);
    let units = cfg.batch * g;
    let mut plan = Plan::new(units, lout, kp, tile_bytes);
    if plan.tile > NR {
        plan.tile = plan.tile.next_multiple_of(NR);
        plan.tiles = lout.div_ceil(plan.tile);
        let jobs = units * plan.tiles;
        plan.job_parallel &= jobs >= 2 * threads() || jobs.is_multiple_of(threads());
    }
    let out = SharedMut::new(out);
    run_jobs(units, &plan, |i, scratch, parallel| {
        let (unit, ti) = (i / plan.tiles, i % plan.tiles);
        let (b, gi) = (unit / g, unit % g);
        let t0 = ti * plan.tile;
        let tn = plan.tile.min(lout - t0);
        let b_len = PackedB::len(kc, tn);
        scratch.set_len(b_len + 2 * tn);
        let (packed, rows) = scratch.split_at_mut(b_len);
        let packed = as_u32(packed);
        let (lo, hi) = rows.split_at_mut(tn);
        let x_row = |r: usize| &x[(b * cin + gi * cin_g + r / k) * l..][..l];
        // im2col rows 2q and 2q + 1, straight into pair q of the packed tile.
        for q in 0..kp {
            im2col_row(cfg, x_row(2 * q), (2 * q) % k, t0, lo);
            let has_hi = 2 * q + 1 < kc;
            if has_hi {
                im2col_row(cfg, x_row(2 * q + 1), (2 * q + 1) % k, t0, hi);
            }
            pack_pair(lo, has_hi.then_some(&*hi), q, kp, NR, packed)?;
        }
        let row0 = (b * cout + gi * cout_g) * lout + t0;
        fill_bias(
            bias.map(|bv| &bv[gi * cout_g..][..cout_g]),
            out,
            row0,
            lout,
            tn,
        )?;
        let a = PackedA {
            data: &w[gi * a_len..][..a_len],
            rows: cout_g,
            k: kc,
        };
        let bt = PackedB {
            data: packed,
            cols: tn,
            k: kc,
        };
        // SAFETY: this job alone owns columns t0..t0+tn of its rows of `out`.
        unsafe { gemm_bf16_shared(a, bt, out, row0, lout, bias.is_some(), parallel, isa()) }
    })
}

// ---------------------------------------------------------------------------
// conv1d_transpose.
// ---------------------------------------------------------------------------

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Per job a block of output channels, as in `conv/`; its weights are the
/// panels of packed columns `(o, tap)` that cover the block (rounded so blocks
/// start on panel edges when the kernel size allows). Per tile of input columns,
/// `x^T` is packed and multiplied by those panels, then scattered (col2im).
fn transpose_bf16(
    cfg: &Conv1dConfig,
    lout: usize,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
    tuning: Tuning,
) -> std::result::Result<(), JobError> {
    if out.is_empty() {
        return Ok(());
    }
    let (g, k, l) = (cfg.groups, cfg.kernel, cfg.length);
    let (cin, cout) = (cfg.in_channels, cfg.out_channels);
    let (cin_g, cout_g) = (cin / g, cout / g);
    let n_g = cout_g * k;
    let b_len = PackedB::len(cin_g, n_g);
    let kp = pairs(cin_g);
    let units = cfg.batch * g;
    let threads = threads();
    let mut ob = (tuning.weight_bytes / (4 * k * kp.max(1))).clamp(1, cout_g);
    if threads > 1 {
        let per_unit = (2 * threads).div_ceil(units);
        ob = ob.min(cout_g.div_ceil(per_unit).max(1));
    }
    // Blocks of whole panels: ob * k a multiple of NR.
    let step = NR / gcd(k, NR);
    if ob > step {
        ob = ob / step * step;
    }
    let blocks = cout_g.div_ceil(ob);
    let jobs = units * blocks;
    let job_parallel = threads > 1 && jobs >= threads;
    let out = SharedMut::new(out);
    let job =
        |i: usize, scratch: &mut Scratch, parallel: bool| -> std::result::Result<(), JobError> {
            let (unit, bi) = (i / blocks, i % blocks);
            let (b, gi) = (unit / g, unit % g);
            let o0 = bi * ob;
            let on = ob.min(cout_g - o0);
            let (p0, p1) = (o0 * k / NR, ((o0 + on) * k).div_ceil(NR));
            let whole = PackedB {
                data: &w[gi * b_len..][..b_len],
                cols: n_g,
                k: cin_g,
            };
            let wb = whole.panels(p0, p1)?;
            let (ncols, off) = (wb.cols, o0 * k - p0 * NR);
            let row0 = (b * cout + gi * cout_g + o0) * lout;
            // SAFETY: this job alone owns these `on` rows of `out`.
            let rows = unsafe { out.slice(row0, on * lout)? };
            for (ol, row) in rows.chunks_exact_mut(lout).enumerate() {
                row.fill(bias.map_or(0.0, |bv| bv[gi * cout_g + o0 + ol]));
            }
            // Input columns per tile: the column block [tn, ncols] within the budget.
            let tile = (tuning.tile_bytes / (4 * ncols)).clamp(MR, l.max(MR)) / MR * MR;
            let x_row =
                |c: usize, t0: usize, tn: usize| &x[(b * cin + gi * cin_g + c) * l + t0..][..tn];
            for t0 in (0..l).step_by(tile) {
                let tn = tile.min(l - t0);
                let a_len = PackedA::len(tn, cin_g);
                scratch.set_len(a_len + tn * ncols);
                let (packed, cols) = scratch.split_at_mut(a_len);
                let packed = as_u32(packed);
                // x^T: rows are input columns t, the inner dimension channels c.
                for q in 0..kp {
                    let hi = (2 * q + 1 < cin_g).then(|| x_row(2 * q + 1, t0, tn));
                    pack_pair(x_row(2 * q, t0, tn), hi, q, kp, MR, packed)?;
                }
                let a = PackedA {
                    data: packed,
                    rows: tn,
                    k: cin_g,
                };
                // SAFETY: `cols` is this job's own scratch.
                unsafe {
                    gemm_bf16_shared(
                        a,
                        wb,
                        SharedMut::new(cols),
                        0,
                        ncols,
                        false,
                        parallel,
                        isa(),
                    )?
                };
                col2im(cfg, lout, t0, tn, cols, ncols, off, rows);
            }
            Ok(())
        };
    if job_parallel {
        use rayon::prelude::*;
        (0..jobs)
            .into_par_iter()
            .with_max_len(1)
            .try_for_each_init(Scratch::new, |s, i| job(i, s, false))
    } else {
        let mut s = Scratch::new();
        (0..jobs).try_for_each(|i| job(i, &mut s, threads > 1))
    }
}

// ---------------------------------------------------------------------------
// matmul.
// ---------------------------------------------------------------------------

/// The registered `kokoro_tvm_ext.matmul_bf16`.
pub fn matmul_function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        matmul_packed(args)?;
        Ok(Any::default())
    })
}

fn matmul_packed(args: &[AnyView]) -> Result<()> {
    const WHO: &str = "matmul_bf16";
    let c = matmul::parse_call(&interface::MATMUL_BF16, args, true)?;
    let w = packed_weights(WHO, &c.w, &packed_shape(Kind::Matmul, 1, &[c.k, c.n]))?;
    let (x, bias, out) = matmul::call_data(WHO, &c)?;
    matmul_bf16_forward(c.rows, c.k, c.n, &x, &w, bias.as_deref(), out)
}

/// `out [rows, n] = x [rows, k] @ w + bias` with `w` packed (as `u32` pairs);
/// the f32 kernel on the unpacked weights where bf16 is not native.
pub fn matmul_bf16_forward(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &[u32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    const WHO: &str = "matmul_bf16";
    ensure!(
        x.len() == rows * k
            && w.len() == PackedB::len(k, n)
            && bias.is_none_or(|b| b.len() == n)
            && out.len() == rows * n,
        VALUE_ERROR,
        "{WHO}: buffer lengths do not match rows={rows}, k={k}, n={n}"
    );
    if !native_bf16() {
        let unpack = |f32_w: &mut [f32]| unpack_b_into(w, k, n, f32_w);
        return with_f32_weights(k * n, unpack, |f32_w| {
            matmul_forward(rows, k, n, x, f32_w, bias, out)
        });
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let mut a = Scratch::new();
    a.set_len(PackedA::len(rows, k));
    let packed = as_u32(&mut a);
    pack_a(rows, k, |i, l| x[i * k + l], packed).map_err(|e| internal(WHO, e))?;
    if let Some(b) = bias {
        for row in out.chunks_exact_mut(n) {
            row.copy_from_slice(b);
        }
    }
    let (a, b) = (
        PackedA {
            data: packed,
            rows,
            k,
        },
        PackedB {
            data: w,
            cols: n,
            k,
        },
    );
    gemm_bf16(a, b, out, 0, n, bias.is_some(), true).map_err(|e| internal(WHO, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_bf16::round_bf16;
    use crate::tensor::testing::{Owned, Rng};

    fn rounded(v: &[f32]) -> Vec<f32> {
        v.iter().map(|&x| round_bf16(x)).collect()
    }

    /// Packs `w` through the registered packer, as the compiler does.
    fn pack(kind: &str, groups: i64, w: &[f32], shape: &[i64]) -> Owned<Bf16> {
        let mut wt = Owned::new(w.to_vec(), shape);
        let kind = tvm_ffi::String::from(kind);
        let view = wt.view();
        let args = [
            AnyView::from(&kind),
            AnyView::from(&groups),
            AnyView::from(&view),
        ];
        let t: Tensor = pack_function()
            .call_packed(&args)
            .unwrap_or_else(|e| panic!("{}", e.message()))
            .try_into()
            .unwrap();
        let data =
            unsafe { std::slice::from_raw_parts(t.data_ptr() as *const Bf16, t.numel()) }.to_vec();
        Owned::new(data, t.shape())
    }

    /// The f32 kernels on bf16-rounded x and w: what the bf16 kernels compute,
    /// up to the order of the f32 additions.
    fn assert_close(what: &str, got: &[f32], want: &[f32], scale: &[f32]) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
            let tol = 2e-5 * (1.0 + s);
            assert!(
                (g - w).abs() <= tol,
                "{what}: [{i}] got {g}, want {w} (tol {tol})"
            );
        }
    }

    /// (batch, cin, cout, length, kernel, stride, pad_left, pad_right, dilation, groups, output_padding, bias)
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
    );

    fn config(c: &Case) -> Conv1dConfig {
        let &(
            batch,
            in_channels,
            out_channels,
            length,
            kernel,
            stride,
            pad_left,
            pad_right,
            dilation,
            groups,
            op,
            _,
        ) = c;
        Conv1dConfig {
            batch,
            in_channels,
            out_channels,
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

    /// The registered bf16 kernel against the f32 one on rounded inputs (tight),
    /// and each tile path of the bf16 kernel with small tiles.
    fn check_conv(transpose: bool, case: &Case) {
        let c = config(case);
        let mut rng = Rng((c.in_channels * 131 + c.length * 7 + c.kernel) as u64);
        let x = rng.vec(c.batch * c.in_channels * c.length);
        let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
        let w_shape = if transpose {
            [c.in_channels, cout_g, c.kernel]
        } else {
            [c.out_channels, cin_g, c.kernel]
        };
        let w = rng.vec(w_shape.iter().product());
        let bias = case.11.then(|| rng.vec(c.out_channels));
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        }
        .unwrap();
        let n_out = c.batch * c.out_channels * lout;
        let (xr, wr) = (rounded(&x), rounded(&w));
        let (mut want, mut scale) = (vec![0.0f32; n_out], vec![0.0f32; n_out]);
        let (xa, wa): (Vec<f32>, Vec<f32>) = (
            xr.iter().map(|v| v.abs()).collect(),
            wr.iter().map(|v| v.abs()).collect(),
        );
        if transpose {
            conv1d_transpose_forward(&c, &xr, &wr, bias.as_deref(), &mut want).unwrap();
            conv1d_transpose_forward(&c, &xa, &wa, None, &mut scale).unwrap();
        } else {
            conv1d_forward(&c, &xr, &wr, bias.as_deref(), &mut want).unwrap();
            conv1d_forward(&c, &xa, &wa, None, &mut scale).unwrap();
        }
        let kind = if transpose {
            "conv1d_transpose"
        } else {
            "conv1d"
        };
        let mut wp = pack(kind, c.groups as i64, &w, &w_shape.map(|d| d as i64));
        let mut xt = Owned::new(
            x.clone(),
            &[c.batch as i64, c.in_channels as i64, c.length as i64],
        );
        let mut bt = bias
            .as_ref()
            .map(|b| Owned::new(b.clone(), &[b.len() as i64]));
        let mut ot = Owned::new(
            vec![f32::NAN; n_out],
            &[c.batch as i64, c.out_channels as i64, lout as i64],
        );
        let mut ints = vec![c.stride as i64, c.pad_left as i64, c.pad_right as i64];
        if transpose {
            ints.push(c.output_padding as i64);
        }
        ints.extend([
            c.dilation as i64,
            c.groups as i64,
            bias.is_some() as i64,
            c.kernel as i64,
        ]);
        let mut views = vec![xt.view(), wp.view()];
        if let Some(b) = bt.as_mut() {
            views.push(b.view());
        }
        views.push(ot.view());
        let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
        args.extend(views.iter().map(AnyView::from));
        let f = if transpose {
            conv1d_transpose_function()
        } else {
            conv1d_function()
        };
        f.call_packed(&args)
            .unwrap_or_else(|e| panic!("{c:?}: {}", e.message()));
        drop(args);
        drop(views);
        // Without native bf16 the fallback computes on f32 x: compare loosely.
        let got = &ot.data;
        if native_bf16() {
            assert_close(&format!("{c:?}"), got, &want, &scale);
        } else {
            for (i, (g, wv)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - wv).abs() <= 1e-2 * (1.0 + scale[i]),
                    "{c:?} fallback [{i}]: {g} vs {wv}"
                );
            }
        }
        if !native_bf16() {
            return;
        }
        // Small tiles and weight blocks: every split of the tiling.
        let wp32: Vec<u32> = wp
            .data
            .chunks_exact(2)
            .map(|p| p[0].0 as u32 | (p[1].0 as u32) << 16)
            .collect();
        for tuning in [
            Tuning {
                tile_bytes: 256,
                weight_bytes: 64,
                direct: None,
            },
            Tuning {
                tile_bytes: 1 << 22,
                weight_bytes: 1 << 22,
                direct: None,
            },
        ] {
            let mut out = vec![f32::NAN; n_out];
            if transpose {
                transpose_bf16(&c, lout, &x, &wp32, bias.as_deref(), &mut out, tuning).unwrap();
            } else {
                conv_bf16(
                    &c,
                    lout,
                    &x,
                    &wp32,
                    bias.as_deref(),
                    &mut out,
                    tuning.tile_bytes,
                )
                .unwrap();
            }
            assert_close(&format!("{c:?} {tuning:?}"), &out, &want, &scale);
        }
    }

    #[test]
    fn conv1d_bf16_matches_f32_on_rounded_inputs() {
        let cases: &[Case] = &[
            // b, cin, cout, l, k, s, pl, pr, d, g, op, bias
            (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
            (2, 3, 5, 17, 3, 1, 1, 1, 1, 1, 0, true),
            (1, 20, 36, 50, 7, 1, 9, 9, 3, 1, 0, true),
            (2, 12, 18, 33, 5, 2, 3, 1, 2, 3, 0, true),
            (1, 8, 8, 40, 3, 1, 1, 1, 1, 8, 0, true),
            (1, 17, 33, 100, 1, 1, 0, 0, 1, 1, 0, false),
            (1, 16, 18, 300, 11, 1, 25, 25, 5, 1, 0, true),
            (1, 22, 24, 61, 12, 6, 4, 3, 1, 1, 0, true),
            (1, 64, 70, 130, 3, 1, 1, 1, 1, 1, 0, true),
        ];
        for case in cases {
            check_conv(false, case);
        }
    }

    #[test]
    fn conv1d_transpose_bf16_matches_f32_on_rounded_inputs() {
        let cases: &[Case] = &[
            (1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, false),
            (1, 12, 10, 20, 20, 10, 5, 5, 1, 1, 0, true),
            (2, 9, 6, 15, 12, 6, 3, 3, 1, 1, 0, true),
            (1, 8, 8, 13, 3, 2, 1, 1, 1, 8, 1, true),
            (1, 6, 9, 11, 5, 2, 2, 0, 3, 3, 1, true),
            (1, 5, 7, 1, 4, 3, 1, 2, 1, 1, 0, true),
            (1, 33, 20, 150, 8, 4, 2, 2, 1, 1, 0, true),
            (1, 40, 36, 70, 12, 6, 3, 3, 1, 1, 0, false),
        ];
        for case in cases {
            check_conv(true, case);
        }
    }

    #[test]
    fn matmul_bf16_matches_f32_on_rounded_inputs() {
        for &(rows, k, n, has_bias) in &[
            (1usize, 1usize, 1usize, false),
            (1, 128, 1090, true),
            (3, 5, 7, true),
            (33, 17, 65, false),
            (70, 300, 20, true),
            (0, 4, 3, true),
        ] {
            let mut rng = Rng((rows * 31 + k * 7 + n) as u64);
            let (x, w, b) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
            let bias = has_bias.then_some(&b[..]);
            let mut want = vec![0.0f32; rows * n];
            let mut scale = vec![0.0f32; rows * n];
            matmul_forward(rows, k, n, &rounded(&x), &rounded(&w), bias, &mut want).unwrap();
            let abs = |v: &[f32]| rounded(v).iter().map(|v| v.abs()).collect::<Vec<_>>();
            matmul_forward(rows, k, n, &abs(&x), &abs(&w), None, &mut scale).unwrap();
            let mut wp = pack("matmul", 1, &w, &[k as i64, n as i64]);
            let mut xt = Owned::new(x.clone(), &[rows as i64, k as i64]);
            let mut bt = Owned::new(b.clone(), &[n as i64]);
            let mut ot = Owned::new(vec![f32::NAN; rows * n], &[rows as i64, n as i64]);
            let flag = has_bias as i64;
            let mut views = vec![xt.view(), wp.view()];
            if has_bias {
                views.push(bt.view());
            }
            views.push(ot.view());
            let mut args = vec![AnyView::from(&flag)];
            args.extend(views.iter().map(AnyView::from));
            matmul_function()
                .call_packed(&args)
                .unwrap_or_else(|e| panic!("{}", e.message()));
            drop(args);
            drop(views);
            let tol = if native_bf16() { 1.0 } else { 500.0 };
            let loose: Vec<f32> = scale.iter().map(|s| s * tol).collect();
            assert_close(&format!("{rows}x{k}x{n}"), &ot.data, &want, &loose);
        }
    }

    #[test]
    fn packer_and_kernels_reject_bad_arguments() {
        let err = |r: Result<Any>| match r {
            Ok(_) => panic!("the call should fail"),
            Err(e) => e.message().to_string(),
        };
        let mut w = Owned::new(vec![0.5f32; 24], &[4, 3, 2]);
        let kind = tvm_ffi::String::from("conv2d");
        let one = 1i64;
        let wv = w.view();
        let m = err(pack_function().call_packed(&[
            AnyView::from(&kind),
            AnyView::from(&one),
            AnyView::from(&wv),
        ]));
        assert!(m.contains("pack_bf16: kind: expected \"conv1d\""), "{m}");
        let kind = tvm_ffi::String::from("conv1d");
        let three = 3i64;
        let m = err(pack_function().call_packed(&[
            AnyView::from(&kind),
            AnyView::from(&three),
            AnyView::from(&wv),
        ]));
        assert!(
            m.contains("pack_bf16: groups: 3 does not divide the 4 channels"),
            "{m}"
        );
        let kind = tvm_ffi::String::from("matmul");
        let m = err(pack_function().call_packed(&[
            AnyView::from(&kind),
            AnyView::from(&one),
            AnyView::from(&wv),
        ]));
        assert!(m.contains("pack_bf16: w: expected rank 2"), "{m}");

        // conv1d_bf16 with f32 weights, then with a packed tensor of the wrong shape.
        let mut x = Owned::new(vec![0.5f32; 3 * 8], &[1, 3, 8]);
        let mut o = Owned::new(vec![0.0f32; 4 * 8], &[1, 4, 8]);
        let ints = [1i64, 1, 1, 1, 1, 0, 3];
        let call = |views: &[TensorView]| {
            let mut args: Vec<AnyView> = ints.iter().map(AnyView::from).collect();
            args.extend(views.iter().map(AnyView::from));
            err(conv1d_function().call_packed(&args))
        };
        let mut wf = Owned::new(vec![0.5f32; 36], &[4, 3, 3]);
        let m = call(&[x.view(), wf.view(), o.view()]);
        assert!(
            m.contains("conv1d_bf16: w: expected dtype bfloat16, got float32"),
            "{m}"
        );
        let mut wrong = pack("conv1d", 1, &[0.5; 24], &[4, 3, 2]);
        let m = call(&[x.view(), wrong.view(), o.view()]);
        assert!(
            m.contains("conv1d_bf16: w: expected shape [1, 1, 5, 8, 2], got [1, 1, 3, 8, 2]"),
            "{m}"
        );
        assert!(m.contains("pack_bf16"), "{m}");
        let mut ok = pack("conv1d", 1, &[0.5; 36], &[4, 3, 3]);
        let mut o9 = Owned::new(vec![0.0f32; 36], &[1, 4, 9]);
        let m = call(&[x.view(), ok.view(), o9.view()]);
        assert!(
            m.contains("conv1d_bf16: out: expected shape [1, 4, 8], got [1, 4, 9]"),
            "{m}"
        );
        let ints0 = [1i64, 1, 1, 1, 1, 0, 0];
        let mut args: Vec<AnyView> = ints0.iter().map(AnyView::from).collect();
        let views = [x.view(), ok.view(), o.view()];
        args.extend(views.iter().map(AnyView::from));
        let m = err(conv1d_function().call_packed(&args));
        assert!(
            m.contains("conv1d_bf16: kernel_size: expected a value in [1,"),
            "{m}"
        );
        drop(args);

        // matmul_bf16: weights packed for another N.
        let mut wm = pack("matmul", 1, &[0.5; 12], &[3, 4]);
        let mut xm = Owned::new(vec![0.5f32; 6], &[2, 3]);
        let mut om = Owned::new(vec![0.0f32; 80], &[2, 40]);
        let zero = 0i64;
        let views = [xm.view(), wm.view(), om.view()];
        let mut args = vec![AnyView::from(&zero)];
        args.extend(views.iter().map(AnyView::from));
        let m = err(matmul_function().call_packed(&args));
        assert!(
            m.contains("matmul_bf16: w: expected shape [1, 2, 2, 32, 2], got [1, 1, 2, 32, 2]"),
            "{m}"
        );
    }

    /// `w` rounded to bf16 and packed through the registry from a random layout,
    /// after the packer's own mutations.
    fn packed(
        rng: &mut Rng,
        kind: &'static str,
        groups: usize,
        w: &[f32],
        shape: &[i64],
    ) -> crate::tensor::fuzz::Spec {
        use crate::tensor::fuzz::{call_returning, check, elements, Call, Data, Spec, Value};
        let args = vec![
            ("kind", Value::Str(kind)),
            ("groups", Value::Int(groups as i64)),
            ("w", Value::Tensor(Spec::input(w.to_vec(), shape))),
        ];
        let t = call_returning("kokoro_tvm_ext.pack_bf16", &args, rng).unwrap();
        let call = Call {
            global: "kokoro_tvm_ext.pack_bf16",
            args,
            want: vec![],
            rel: 0.0,
            bad: vec![("kind", Value::Str("conv2d")), ("groups", Value::Int(0))],
        };
        check(&call, rng);
        let data = elements::<Bf16>(&t);
        Spec::derived(vec![0.0; data.len()], t.shape()).with_data(Data::Bf16(data))
    }

    #[test]
    fn random_calls_through_the_registry_match_the_reference_and_bad_ones_name_the_argument() {
        use crate::tensor::fuzz::{
            check, conv_bad_scalars, reference_matmul, size, Call, ConvCase, Spec, Value,
        };
        let mut rng = Rng(0xbf16_0001);
        // Where bf16 is not native the inputs stay f32.
        let x_in = |v: Vec<f32>| if native_bf16() { rounded(&v) } else { v };
        for case in 0..36 {
            let i = |v: usize| v as i64;
            if case % 3 == 2 {
                let (rows, k, n) = (size(&mut rng, 5), 1 + rng.below(9), 1 + rng.below(40));
                let has_bias = rng.below(2) == 1;
                let (x, w, bias) = (rng.vec(rows * k), rng.vec(k * n), rng.vec(n));
                let (xr, wr) = (x_in(x.clone()), rounded(&w));
                let want = reference_matmul((rows, k, n), &xr, &wr, has_bias.then_some(&bias[..]));
                let wp = packed(&mut rng, "matmul", 1, &w, &[i(k), i(n)]);
                let mut args = vec![
                    ("has_bias", Value::Int(has_bias as i64)),
                    (
                        "x",
                        Value::Tensor(Spec::input(x, &[i(rows), i(k)]).any_rank()),
                    ),
                    ("w", Value::Tensor(wp)),
                ];
                if has_bias {
                    args.push(("bias", Value::Tensor(Spec::derived(bias, &[i(n)]))));
                }
                args.push((
                    "out",
                    Value::Tensor(Spec::output(&[i(rows), i(n)]).deciding()),
                ));
                let call = Call {
                    global: "kokoro_tvm_ext.matmul_bf16",
                    args,
                    want: vec![("out", want)],
                    rel: 2e-5,
                    bad: vec![("has_bias", Value::Int(2))],
                };
                check(&call, &mut rng);
                continue;
            }
            let case = ConvCase::random(&mut rng, case % 3 == 1);
            let c = &case.c;
            let want = case.reference(&x_in(case.x.clone()), &rounded(&case.w));
            let kind = if case.transpose {
                "conv1d_transpose"
            } else {
                "conv1d"
            };
            let wp = packed(&mut rng, kind, c.groups, &case.w, &case.w_shape().map(i));
            let mut args = case.args(wp, &[("kernel_size", i(c.kernel))]);
            args.push((
                "out",
                Value::Tensor(Spec::output(&case.out_shape()).deciding()),
            ));
            let mut bad = conv_bad_scalars(c, case.transpose);
            bad.push(("kernel_size", Value::Int(0)));
            let call = Call {
                global: case.global(true),
                args,
                want: vec![("out", want)],
                rel: 2e-5,
                bad,
            };
            check(&call, &mut rng);
        }
        // bf16_native takes no arguments.
        let call = Call {
            global: "kokoro_tvm_ext.bf16_native",
            args: vec![],
            want: vec![],
            rel: 0.0,
            bad: vec![],
        };
        check(&call, &mut rng);
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }

    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }

    /// (wall, process CPU) seconds: CPU time is what a busy, shared machine
    /// does not inflate.
    fn now() -> (f64, f64) {
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: writes the struct we pass; clock 2 is CLOCK_PROCESS_CPUTIME_ID.
        unsafe { clock_gettime(2, &mut ts) };
        let cpu = ts.sec as f64 + ts.nsec as f64 * 1e-9;
        (
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64(),
            cpu,
        )
    }

    /// GFLOP/s by wall clock and per CPU second (medians of 5), f32 against
    /// bf16 at Kokoro's decoder shapes:
    /// `cargo test --release -p tvm-ext bench_bf16_conv -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bench_bf16_conv() {
        println!("bf16 native: {}, threads: {}", native_bf16(), threads());
        // (transpose, cin, cout, k, stride, dilation, L)
        let shapes: &[(bool, usize, usize, usize, usize, usize, usize)] = &[
            (false, 128, 128, 7, 1, 3, 19200),
            (false, 128, 128, 3, 1, 1, 19200),
            (false, 256, 256, 11, 1, 5, 3200),
            (false, 512, 512, 3, 1, 1, 320),
            (false, 1090, 1024, 3, 1, 1, 160),
            (true, 512, 256, 20, 10, 1, 320),
            (true, 256, 128, 12, 6, 1, 3200),
        ];
        for &(transpose, cin, cout, k, s, d, l) in shapes {
            let (p, op) = if transpose {
                ((k - s) / 2, 0)
            } else {
                (d * (k - 1) / 2, 0)
            };
            let c = Conv1dConfig {
                batch: 1,
                in_channels: cin,
                out_channels: cout,
                length: l,
                kernel: k,
                stride: s,
                pad_left: p,
                pad_right: p,
                dilation: d,
                groups: 1,
                output_padding: op,
            };
            let lout = if transpose {
                c.transpose_out_len()
            } else {
                c.conv_out_len()
            }
            .unwrap();
            let x: Vec<f32> = (0..cin * l)
                .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
                .collect();
            let w: Vec<f32> = (0..cin * cout * k)
                .map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5)
                .collect();
            let bias = vec![0.1f32; cout];
            let (kind, shape) = if transpose {
                (Kind::Conv1dTranspose, [cin, cout, k])
            } else {
                (Kind::Conv1d, [cout, cin, k])
            };
            let ps = packed_shape(kind, 1, &shape);
            let mut packed = vec![0u32; (ps[1] * ps[2] * ps[3]) as usize];
            if transpose {
                pack_b(cin, cout * k, |ci, j| w[ci * cout * k + j], &mut packed).unwrap();
            } else {
                pack_a(cout, cin * k, |o, r| w[o * cin * k + r], &mut packed).unwrap();
            }
            let mut out = vec![0.0f32; cout * lout];
            let flops = 2.0 * (cin * cout * k) as f64 * if transpose { l } else { lout } as f64;
            let mut rate = |f: &mut dyn FnMut(&mut [f32])| {
                f(&mut out);
                let mut runs: Vec<(f64, f64)> = (0..5)
                    .map(|_| {
                        let (w0, c0) = now();
                        f(&mut out);
                        let (w1, c1) = now();
                        (flops / (w1 - w0) / 1e9, flops / (c1 - c0) / 1e9)
                    })
                    .collect();
                runs.sort_by(|a, b| a.1.total_cmp(&b.1));
                let cpu = runs[2].1;
                runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                (runs[2].0, cpu)
            };
            let f32r = rate(&mut |o| {
                if transpose {
                    conv1d_transpose_forward(&c, &x, &w, Some(&bias), o).unwrap()
                } else {
                    conv1d_forward(&c, &x, &w, Some(&bias), o).unwrap()
                }
            });
            let bf16r = rate(&mut |o| {
                conv_bf16_forward(&c, transpose, &x, &packed, Some(&bias), o).unwrap()
            });
            println!(
                "{} {cin}->{cout} k{k} s{s} d{d} L{l}: f32 {:.0} wall / {:.0} per CPU-s, bf16 {:.0} / {:.0} GFLOP/s",
                if transpose { "convT" } else { "conv1d" },
                f32r.0,
                f32r.1,
                bf16r.0,
                bf16r.1
            );
        }
    }
}
