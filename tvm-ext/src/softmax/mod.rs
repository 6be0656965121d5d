//! Softmax over the last axis, as ALBERT's attention takes it over each row of
//! its scores.
//!
//! Global name: `kokoro_tvm_ext.softmax(x, out)`, destination-passing style
//! (interface: [`crate::interface::SOFTMAX`]).
//! - `x`: float32 `[..., N]` (rank >= 1), any strides;
//! - `out`: float32, `x`'s shape, contiguous.
//!
//! `out[r, j] = exp(x[r, j] - max_r) / sum_j exp(x[r, j] - max_r)`, as torch
//! computes it: a row holding NaN becomes NaN, a row of only -inf NaN (0/0). TVM's
//! own softmax ran scalar (7 ns an element, 100 ms of a 309-token text stage);
//! here each row's max, exponentials and sum are vectorized loops in the widest
//! instruction set of the CPU ([`Isa`]), the rows split over the rayon pool.
use rayon::prelude::*;
use tvm_ffi::{ensure, AnyView, Function, Result, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::exp::exp_reduced;
use crate::interface;
use crate::isa::Isa;
use crate::tensor::{byte_span, expect_shape, input, output};

/// The registered function.
pub fn function() -> Function {
    dps_function(softmax_packed)
}

fn softmax_packed(args: &[AnyView]) -> Result<()> {
    let mut c = Cursor::new(&interface::SOFTMAX, args)?;
    let x = c.tensor("x")?;
    let out = c.output("out")?;
    c.finish()?;
    let shape = x.shape().to_vec();
    ensure!(
        !shape.is_empty(),
        VALUE_ERROR,
        "softmax: x: expected rank >= 1, got rank 0"
    );
    expect_shape(&out, "softmax: out", &shape)?;
    crate::counters::note(|| {
        let elements = shape.iter().product::<i64>().max(0) as u64;
        crate::counters::elementwise_work("softmax", elements, 4)
    });
    let xs = input::<f32>(&x, "softmax: x")?;
    let ys = output::<f32>(&out, "softmax: out")?;
    no_overlap("softmax", &[("out", span(ys))], &[("x", byte_span(&x))])?;
    softmax_rows(&xs, ys, shape[shape.len() - 1] as usize, Isa::best());
    Ok(())
}

/// Elements per parallel task: smaller tasks cost more in hand-offs than they save.
const TASK_ELEMENTS: usize = 1 << 14;

/// The softmax of each row of `n` elements of `x` into `y` (same length).
pub(crate) fn softmax_rows(x: &[f32], y: &mut [f32], n: usize, isa: Isa) {
    if n == 0 || x.is_empty() {
        return;
    }
    let rows_per_task = (TASK_ELEMENTS / n).max(1);
    y.par_chunks_mut(n * rows_per_task)
        .zip(x.par_chunks(n * rows_per_task))
        .for_each(|(y, x)| {
            for (yr, xr) in y.chunks_exact_mut(n).zip(x.chunks_exact(n)) {
                match isa {
                    // SAFETY: `Isa::best()` and `Isa::available()` only name sets this CPU runs.
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512
                    | Isa::Avx512Vnni
                    | Isa::Avx512Bf16
                    | Isa::AmxInt8
                    | Isa::AmxBf16 => unsafe { x86::row_avx512(xr, yr) },
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => unsafe { x86::row_avx2(xr, yr) },
                    #[cfg(target_arch = "aarch64")]
                    Isa::Neon | Isa::Dotprod | Isa::I8mm | Isa::NeonBf16 => unsafe {
                        arm::row_neon(xr, yr)
                    },
                    Isa::Portable => row(xr, yr),
                }
            }
        });
}

/// Independent partial results per row (a vector's lanes), so that the
/// reductions vectorize without reassociating a float sum. Element `j` always
/// adds into lane `j % LANES`, the tail too, and a masked-out score's
/// exponential is exactly 0: a row padded with masked positions (a short item
/// in a batch of longer ones) sums to the same bits as the row alone.
const LANES: usize = 16;

/// One row; plain loops over `LANES` partial maxima and sums, which LLVM
/// vectorizes for the instruction set it is inlined into.
#[inline(always)]
fn row(x: &[f32], y: &mut [f32]) {
    let mut peaks = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for (p, &v) in peaks.iter_mut().zip(c) {
            // NaN never wins a comparison; it reaches the output through exp.
            *p = if v > *p { v } else { *p };
        }
    }
    let max = peaks
        .iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let mut sums = [0.0f32; LANES];
    let full = x.len() - tail.len();
    let (y_full, y_tail) = y.split_at_mut(full);
    for (yc, xc) in y_full
        .chunks_exact_mut(LANES)
        .zip(x[..full].chunks_exact(LANES))
    {
        for ((s, o), &v) in sums.iter_mut().zip(yc).zip(xc) {
            *o = exp_below_zero(v - max);
            *s += *o;
        }
    }
    for ((s, o), &v) in sums.iter_mut().zip(y_tail).zip(tail) {
        *o = exp_below_zero(v - max);
        *s += *o;
    }
    let sum = sums.iter().sum::<f32>();
    let inv = 1.0 / sum;
    for o in y.iter_mut() {
        *o *= inv;
    }
}

/// `e^d` for `d <= 0` (a value less the row's max; NaN stays NaN). Below -87 it
/// is under 2e-38 of the row's largest term, which is 1: it is taken as 0, as
/// float32 exp gives for an attention mask's -3.4e38.
#[inline(always)]
fn exp_below_zero(d: f32) -> f32 {
    if d < -87.0 {
        0.0
    } else {
        exp_reduced(d)
    }
}

#[cfg(target_arch = "aarch64")]
mod arm;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;
