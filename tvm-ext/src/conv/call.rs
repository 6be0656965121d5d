//! Reading a convolution call: its arguments (through [`crate::args::Cursor`]),
//! geometry and output length, shared by the f32, bf16 and Winograd kernels.
use super::*;

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
    /// bf16 weights packed by `kokoro_tvm_ext.pack_bf16` ([`super::bf16`]).
    Bf16,
    /// int8 weights packed by `kokoro_tvm_ext.pack_int8` ([`super::int8`]).
    Int8,
    /// float32 weights transformed by `kokoro_tvm_ext.pack_winograd` ([`super::winograd`]).
    Winograd,
}

/// The tensors of a call, read after its scalars, then type-checked.
pub(super) fn take_tensors(c: &mut Cursor, weights: WeightKind) -> Result<Tensors> {
    let who = c.who();
    let x = c.tensor("x")?;
    let w = c.tensor("w")?;
    let bias = c.optional_tensor("bias")?;
    let out = c.output("out")?;
    check_dtype::<f32>(&x, &format!("{who}: x"))?;
    if weights == WeightKind::Bf16 {
        check_dtype::<Bf16>(&w, &format!("{who}: w"))?;
    } else if weights == WeightKind::Int8 {
        check_dtype::<i8>(&w, &format!("{who}: w"))?;
    } else {
        check_dtype::<f32>(&w, &format!("{who}: w"))?;
    }
    if let Some(b) = &bias {
        check_dtype::<f32>(b, &format!("{who}: bias"))?;
    }
    check_dtype::<f32>(&out, &format!("{who}: out"))?;
    Ok(Tensors { x, w, bias, out })
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
pub(crate) fn parse_call(
    iface: &'static Interface,
    args: &[AnyView],
    transpose: bool,
    weights: WeightKind,
) -> Result<ConvCall> {
    let who = iface.name;
    let packed = weights != WeightKind::Torch;
    let mut c = Cursor::new(iface, args)?;
    let stride = c.int_in("stride", 1, MAX_PRIM)?;
    let pad_left = c.int_in("pad_left", 0, MAX_PRIM)?;
    let pad_right = c.int_in("pad_right", 0, MAX_PRIM)?;
    let output_padding = if transpose {
        c.int_in("output_padding", 0, MAX_PRIM)?
    } else {
        0
    };
    let dilation = c.int_in("dilation", 1, MAX_PRIM)?;
    let groups = c.int_in("groups", 1, MAX_PRIM)?;
    c.flag("has_bias")?;
    let kernel_size = if packed {
        Some(c.int_in("kernel_size", 1, MAX_PRIM)?)
    } else {
        None
    };
    ensure!(
        !transpose || output_padding < stride.max(dilation),
        VALUE_ERROR,
        "{who}: output_padding: must be smaller than stride or dilation, got \
         output_padding={output_padding}, stride={stride}, dilation={dilation}"
    );
    let t = take_tensors(&mut c, weights)?;
    c.finish()?;
    let xs = shape_of(&t.x, &format!("{who}: x"), 3)?.to_vec();
    let (out_channels, kernel) = match kernel_size {
        Some(k) => (
            dim(shape_of(&t.out, &format!("{who}: out"), 3)?[1]),
            k as usize,
        ),
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
            (cfg.length as i128 - 1) * cfg.stride as i128
                - cfg.pad_left as i128
                - cfg.pad_right as i128
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
    crate::counters::note(|| {
        let weight_bytes = match weights {
            WeightKind::Bf16 => 2,
            WeightKind::Int8 => 1,
            WeightKind::Torch | WeightKind::Winograd => 4,
        };
        let winograd = weights == WeightKind::Winograd;
        crate::counters::conv_work(&cfg, lout, transpose, winograd, weight_bytes)
    });
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
    let ins = [
        ("x", span(&x)),
        ("w", byte_span(&t.w)),
        ("bias", bias.as_deref().and_then(span)),
    ];
    no_overlap(who, &[("out", span(out))], &ins)?;
    Ok((x, bias, out))
}
