//! Both convolutions straight from their definitions, in f64, for tests.
use super::Conv1dConfig;

/// (value, sum of |terms|) per output, straight from the definition.
pub(crate) fn reference_conv(
    c: &Conv1dConfig,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<(f64, f64)> {
    let lout = c.conv_out_len().unwrap();
    let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
    let mut out = vec![(0.0, 0.0); c.batch * c.out_channels * lout];
    for b in 0..c.batch {
        for o in 0..c.out_channels {
            let g = o / cout_g;
            for t in 0..lout {
                let mut acc = bias.map_or(0.0, |bv| bv[o] as f64);
                let mut mag = acc.abs();
                for ci in 0..cin_g {
                    for k in 0..c.kernel {
                        let pos = (t * c.stride + k * c.dilation) as i64 - c.pad_left as i64;
                        if pos < 0 || pos >= c.length as i64 {
                            continue;
                        }
                        let xv = x[(b * c.in_channels + g * cin_g + ci) * c.length + pos as usize]
                            as f64;
                        let wv = w[(o * cin_g + ci) * c.kernel + k] as f64;
                        acc += xv * wv;
                        mag += (xv * wv).abs();
                    }
                }
                out[(b * c.out_channels + o) * lout + t] = (acc, mag);
            }
        }
    }
    out
}

pub(crate) fn reference_transpose(
    c: &Conv1dConfig,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<(f64, f64)> {
    let lout = c.transpose_out_len().unwrap();
    let (cin_g, cout_g) = (c.in_channels / c.groups, c.out_channels / c.groups);
    let mut out = vec![(0.0, 0.0); c.batch * c.out_channels * lout];
    for b in 0..c.batch {
        for o in 0..c.out_channels {
            let v = bias.map_or(0.0, |bv| bv[o] as f64);
            for t in 0..lout {
                out[(b * c.out_channels + o) * lout + t] = (v, v.abs());
            }
        }
        for ci in 0..c.in_channels {
            let g = ci / cin_g;
            for ol in 0..cout_g {
                let o = g * cout_g + ol;
                for t in 0..c.length {
                    for k in 0..c.kernel {
                        let p = (t * c.stride + k * c.dilation) as i64 - c.pad_left as i64;
                        if p < 0 || p >= lout as i64 {
                            continue;
                        }
                        let xv = x[(b * c.in_channels + ci) * c.length + t] as f64;
                        let wv = w[(ci * cout_g + ol) * c.kernel + k] as f64;
                        let e = &mut out[(b * c.out_channels + o) * lout + p as usize];
                        e.0 += xv * wv;
                        e.1 += (xv * wv).abs();
                    }
                }
            }
        }
    }
    out
}
