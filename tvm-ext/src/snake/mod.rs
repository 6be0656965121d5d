//! Snake activation, `x + sin(alpha * x)^2 / alpha` per channel, as in Kokoro's
//! vocoder residual blocks (`AdaINResBlock1`).
//!
//! Global name: `kokoro_tvm_ext.snake(x, alpha, out)`, destination-passing style
//! (interface: [`crate::interface::SNAKE`]).
//! - `x`: float32 `[B, C, L]`, any strides;
//! - `alpha`: float32 `[1, C, 1]` (the torch parameter's shape), any strides;
//! - `out`: float32 `[B, C, L]`, contiguous.
use rayon::prelude::*;
use tvm_ffi::{ensure, AnyView, Function, Result, TensorView, VALUE_ERROR};

use crate::args::{dps_function, no_overlap, span, Cursor};
use crate::interface;
use crate::tensor::{byte_span, expect_shape, input, output, shape_of};

/// The registered function.
pub fn function() -> Function {
    dps_function(snake_packed)
}

fn snake_packed(args: &[AnyView]) -> Result<()> {
    let mut c = Cursor::new(&interface::SNAKE, args)?;
    let x = c.tensor("x")?;
    let alpha = c.tensor("alpha")?;
    let out = c.output("out")?;
    c.finish()?;
    snake(&x, &alpha, &out)
}

/// Validates the arguments and runs the kernel.
pub fn snake(x: &TensorView, alpha: &TensorView, out: &TensorView) -> Result<()> {
    let shape = shape_of(x, "snake: x", 3)?.to_vec();
    let (channels, length) = (shape[1], shape[2]);
    expect_shape(alpha, "snake: alpha", &[1, channels, 1])?;
    expect_shape(out, "snake: out", &shape)?;
    let xs = input::<f32>(x, "snake: x")?;
    let alphas = input::<f32>(alpha, "snake: alpha")?;
    ensure!(
        alphas.iter().all(|a| *a != 0.0),
        VALUE_ERROR,
        "snake: alpha must be non-zero in every channel"
    );
    let ys = output::<f32>(out, "snake: out")?;
    no_overlap(
        "snake",
        &[("out", span(ys))],
        &[("x", byte_span(x)), ("alpha", byte_span(alpha))],
    )?;
    crate::counters::note(|| {
        let elements = (shape[0] * channels * length) as u64;
        crate::counters::elementwise_work("Snake", elements, 5)
    });
    if length == 0 {
        return Ok(());
    }
    let length = length as usize;
    ys.par_chunks_mut(length)
        .zip(xs.par_chunks(length))
        .enumerate()
        .for_each(|(row, (y, x))| {
            let a = alphas[row % channels as usize];
            let inv = 1.0 / a;
            for (yi, xi) in y.iter_mut().zip(x) {
                let s = (a * xi).sin();
                *yi = xi + inv * s * s;
            }
        });
    Ok(())
}

#[cfg(test)]
mod tests;
