//! The one body of the packed matmuls (bf16, int8): check the call, fall back
//! to the f32 matmul where the precision is not native, pack `x`, put the bias
//! in place, multiply; the precision ([`MatmulPrecision`]) packs and runs its
//! micro-kernel.
use tvm_ffi::{AnyView, Function, Result};

use super::{call_data, expect_packed_call, matmul_forward, parse_call, prefill_bias, WeightKind};
use crate::args::dps_function;
use crate::gemm::packed::Kind;
use crate::interface::Interface;
use crate::job::{internal, JobError};
use crate::precision::{with_f32_weights, Precision};
use crate::scratch::Scratch;

/// A precision's steps in the packed matmul.
pub(crate) trait MatmulPrecision: Precision {
    /// The registered matmul of the precision.
    const MATMUL: &'static Interface;
    /// What a call's `w` holds.
    const MATMUL_WEIGHTS: WeightKind;

    /// Packs `x` (`[rows, k]`) into `scratch` as the GEMM's broadcast operand.
    fn pack_rows(
        rows: usize,
        k: usize,
        x: &[f32],
        scratch: &mut Scratch,
    ) -> std::result::Result<(), JobError>;

    /// `out = (accumulate ? out : 0) + x w` of `shape` `(rows, k, n)`, `x` packed in `scratch` by
    /// [`Self::pack_rows`], the output split over the threads.
    fn multiply(
        shape: (usize, usize, usize),
        scratch: &mut Scratch,
        w: &Self::Weights<'_>,
        out: &mut [f32],
        accumulate: bool,
    ) -> std::result::Result<(), JobError>;
}

/// The registered matmul of a packed precision.
pub(crate) fn packed_function<P: MatmulPrecision>() -> Function {
    dps_function(packed_call::<P>)
}

fn packed_call<P: MatmulPrecision>(args: &[AnyView]) -> Result<()> {
    let who = P::MATMUL.name;
    let c = parse_call(P::MATMUL, args, P::MATMUL_WEIGHTS)?;
    P::with_call_weights(who, &c.w, Kind::Matmul, 1, &[c.k, c.n], |w| {
        let (x, bias, out) = call_data(who, &c)?;
        packed_forward::<P>(c.rows, c.k, c.n, &x, w, bias.as_deref(), out)
    })
}

/// `out [rows, n] = x [rows, k] @ w + bias` with `w` packed by the precision's
/// packer; the f32 matmul on the unpacked weights where it is not native.
pub(crate) fn packed_forward<P: MatmulPrecision>(
    rows: usize,
    k: usize,
    n: usize,
    x: &[f32],
    w: &P::Weights<'_>,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<()> {
    let who = P::MATMUL.name;
    let w_fits = P::weights_fit(w, Kind::Matmul, 1, &[k, n]);
    expect_packed_call(who, (rows, k, n), x, w_fits, bias, out)?;
    if !P::native() {
        return with_f32_weights::<P, _>(w, Kind::Matmul, 1, &[k, n], |f32_w| {
            matmul_forward(rows, k, n, x, f32_w, bias, out)
        });
    }
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let mut scratch = Scratch::new();
    let pack_timer = crate::counters::phase(if P::MATMUL_WEIGHTS == WeightKind::Int8 {
        crate::counters::Phase::QuantizePack
    } else {
        crate::counters::Phase::Bf16Pack
    });
    P::pack_rows(rows, k, x, &mut scratch).map_err(|e| internal(who, e))?;
    drop(pack_timer);
    prefill_bias(out, n, bias);
    P::multiply((rows, k, n), &mut scratch, w, out, bias.is_some()).map_err(|e| internal(who, e))
}
