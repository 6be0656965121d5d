//! Random convolution calls for the property tests at the FFI boundary
//! ([`crate::tensor::fuzz`]): the geometry five kernels share (conv1d,
//! conv1d_transpose, their bf16 variants and, stride 1, Winograd's).
use super::Conv1dConfig;
use crate::tensor::fuzz::{size, Spec, Value};
use crate::tensor::testing::Rng;

/// A random geometry with an output of at least one element along L.
fn random_config(rng: &mut Rng, transpose: bool) -> Conv1dConfig {
    loop {
        let groups = 1 + rng.below(3);
        let c = Conv1dConfig {
            batch: size(rng, 2),
            in_channels: groups * (1 + rng.below(4)),
            out_channels: groups * (1 + rng.below(4)),
            length: size(rng, 20),
            kernel: 1 + rng.below(5),
            stride: 1 + rng.below(3),
            pad_left: rng.below(4),
            pad_right: rng.below(4),
            dilation: 1 + rng.below(3),
            groups,
            output_padding: 0,
        };
        let c = Conv1dConfig {
            output_padding: if transpose {
                rng.below(c.stride.max(c.dilation))
            } else {
                0
            },
            ..c
        };
        let lout = if transpose {
            c.transpose_out_len()
        } else {
            c.conv_out_len()
        };
        if lout.is_some() {
            return c;
        }
    }
}

/// One random convolution call: geometry, data, and the parts of its argument list.
pub struct ConvCase {
    pub c: Conv1dConfig,
    pub transpose: bool,
    pub has_bias: bool,
    pub x: Vec<f32>,
    pub w: Vec<f32>,
    pub bias: Vec<f32>,
}

impl ConvCase {
    /// Draws, in this order: the geometry, has_bias, x, w, bias.
    pub fn random(rng: &mut Rng, transpose: bool) -> ConvCase {
        let c = random_config(rng, transpose);
        let has_bias = rng.below(2) == 1;
        let x = rng.vec(c.batch * c.in_channels * c.length);
        let mut case = ConvCase {
            c,
            transpose,
            has_bias,
            x,
            w: Vec::new(),
            bias: Vec::new(),
        };
        case.w = rng.vec(case.w_shape().iter().product());
        case.bias = rng.vec(case.c.out_channels);
        case
    }

    /// torch's weight layouts: `[out, in / groups, k]`, transposed `[in, out / groups, k]`.
    pub fn w_shape(&self) -> [usize; 3] {
        let c = &self.c;
        if self.transpose {
            [c.in_channels, c.out_channels / c.groups, c.kernel]
        } else {
            [c.out_channels, c.in_channels / c.groups, c.kernel]
        }
    }

    /// The naive reference on `x` and `w` (the case's own, or rounded copies).
    pub fn reference(&self, x: &[f32], w: &[f32]) -> Vec<(f64, f64)> {
        let b = self.has_bias.then_some(&self.bias[..]);
        if self.transpose {
            crate::conv::reference::reference_transpose(&self.c, x, w, b)
        } else {
            crate::conv::reference::reference_conv(&self.c, x, w, b)
        }
    }

    pub fn out_shape(&self) -> [i64; 3] {
        let lout = if self.transpose {
            self.c.transpose_out_len()
        } else {
            self.c.conv_out_len()
        };
        [
            self.c.batch as i64,
            self.c.out_channels as i64,
            lout.unwrap() as i64,
        ]
    }

    /// The kernel's global name: the f32 or the bf16 one.
    pub fn global(&self, bf16: bool) -> &'static str {
        match (self.transpose, bf16) {
            (false, false) => "kokoro_tvm_ext.conv1d",
            (true, false) => "kokoro_tvm_ext.conv1d_transpose",
            (false, true) => "kokoro_tvm_ext.conv1d_bf16",
            (true, true) => "kokoro_tvm_ext.conv1d_transpose_bf16",
        }
    }

    /// The scalars (then `extra`), `x`, the given `w` and the bias when there is one; `out` is the caller's.
    pub fn args(&self, w: Spec, extra: &[(&'static str, i64)]) -> Vec<(&'static str, Value)> {
        let c = &self.c;
        let i = |v: usize| v as i64;
        let mut args = conv_scalars(c, self.transpose, self.has_bias, extra);
        let x = Spec::input(self.x.clone(), &[i(c.batch), i(c.in_channels), i(c.length)]);
        args.push(("x", Value::Tensor(x)));
        args.push(("w", Value::Tensor(w)));
        if self.has_bias {
            let bias = Spec::derived(self.bias.clone(), &[i(c.out_channels)]);
            args.push(("bias", Value::Tensor(bias)));
        }
        args
    }
}

/// The scalars of a conv1d (or conv1d_transpose) call, then `extra` (the
/// packed kernels' kernel_size).
pub fn conv_scalars(
    c: &Conv1dConfig,
    transpose: bool,
    has_bias: bool,
    extra: &[(&'static str, i64)],
) -> Vec<(&'static str, Value)> {
    let mut v = vec![
        ("stride", c.stride as i64),
        ("pad_left", c.pad_left as i64),
        ("pad_right", c.pad_right as i64),
    ];
    if transpose {
        v.push(("output_padding", c.output_padding as i64));
    }
    v.extend([
        ("dilation", c.dilation as i64),
        ("groups", c.groups as i64),
        ("has_bias", has_bias as i64),
    ]);
    v.extend(extra);
    v.into_iter().map(|(n, i)| (n, Value::Int(i))).collect()
}

/// The scalar values every convolution refuses.
pub fn conv_bad_scalars(c: &Conv1dConfig, transpose: bool) -> Vec<(&'static str, Value)> {
    let mut bad = vec![
        ("stride", Value::Int(0)),
        ("pad_left", Value::Int(-1)),
        ("pad_right", Value::Int(-2)),
        ("dilation", Value::Int(0)),
        ("groups", Value::Int(0)),
        ("has_bias", Value::Int(2)),
    ];
    if transpose {
        bad.push(("output_padding", Value::Int(-1)));
        bad.push((
            "output_padding",
            Value::Int(c.stride.max(c.dilation) as i64),
        ));
    }
    bad
}
