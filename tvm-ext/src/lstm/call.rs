//! Reading a packed LSTM call through [`crate::args::Cursor`] and checking its tensors.
use super::*;

pub(super) fn direction_name(d: usize) -> &'static str {
    if d == 0 {
        "forward"
    } else {
        "reverse"
    }
}

pub(super) fn weight_name(kind: &str, layer: usize, d: usize) -> String {
    format!("lstm: {kind}[layer {layer}, {}]", direction_name(d))
}

/// Parses and validates the packed arguments, then runs [`lstm_forward`].
pub fn lstm_packed(args: &[AnyView]) -> Result<()> {
    let mut c = Cursor::new(&interface::LSTM, args)?;
    let num_layers = c.int("num_layers")?;
    ensure!(
        (1..=1 << 20).contains(&num_layers),
        VALUE_ERROR,
        "lstm: num_layers: expected a value >= 1, got {num_layers}"
    );
    let layers = num_layers as usize;
    let bidirectional = c.flag("bidirectional")?;
    let batch_first = c.flag("batch_first")?;
    let has_biases = c.flag("has_biases")?;
    c.flag("has_lengths")?;
    c.flag("has_state")?;
    let dirs = if bidirectional { 2 } else { 1 };

    // Take every tensor argument in order.
    let x = c.tensor("x")?;
    let lengths = c.optional_tensor("lengths")?;
    let state = c.optional_tensor("h0")?.zip(c.optional_tensor("c0")?);
    let mut params = Vec::with_capacity(layers * dirs);
    for _ in 0..layers * dirs {
        let w_ih = c.tensor("w_ih")?;
        let w_hh = c.tensor("w_hh")?;
        let biases = c.optional_tensor("b_ih")?.zip(c.optional_tensor("b_hh")?);
        debug_assert_eq!(biases.is_some(), has_biases);
        params.push((w_ih, w_hh, biases));
    }
    let y = c.output("y")?;
    let h_n = c.output("h_n")?;
    let c_n = c.output("c_n")?;
    c.finish()?;

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
    let (batch, seq_len) = if batch_first {
        (xs[0], xs[1])
    } else {
        (xs[1], xs[0])
    };
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
    crate::counters::note(|| {
        // Per step, per layer and direction: gates x (inputs + hidden) multiply-adds.
        let (b, t, h) = (batch as u64, seq_len as u64, hidden as u64);
        let (mut flops, mut bytes) = (0u64, 4 * b * t * input_size as u64);
        for l in 0..layers as u64 {
            let inputs = if l == 0 {
                input_size as u64
            } else {
                dirs as u64 * h
            };
            flops += dirs as u64 * 2 * b * t * 4 * h * (inputs + h);
            bytes += dirs as u64 * 4 * 4 * h * (inputs + h);
        }
        bytes += 4 * b * t * dirs as u64 * h;
        crate::counters::Work {
            class: "LSTM",
            flops,
            bytes,
        }
    });
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
        let in_l = if l == 0 {
            input_size
        } else {
            dirs as i64 * hidden
        };
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
    let outs = [
        ("y", span(y_data)),
        ("h_n", span(hn_data)),
        ("c_n", span(cn_data)),
    ];
    let mut ins: Vec<(&str, Span)> = vec![("x", span(&x_data))];
    if let Some(v) = &len_data {
        ins.push(("lengths", span(v)));
    }
    if let Some((h0, c0)) = &state_data {
        ins.push(("h0", span(h0)));
        ins.push(("c0", span(c0)));
    }
    for (w_ih, w_hh, biases) in &param_data {
        ins.push(("a weight", span(w_ih)));
        ins.push(("a weight", span(w_hh)));
        if let Some((b_ih, b_hh)) = biases {
            ins.push(("a bias", span(b_ih)));
            ins.push(("a bias", span(b_hh)));
        }
    }
    no_overlap("lstm", &outs, &ins)?;

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
