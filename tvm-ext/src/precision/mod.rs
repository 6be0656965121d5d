//! Precision as a parameter of the kernels. A precision (f32, bf16, int8) is
//! a type implementing [`Precision`]: its weights, the width of their panels,
//! its micro-kernel (a row of [`table::TABLE`], picked once from the CPU) and
//! how its weights unpack to f32 where it is not native. The operators are
//! generic over it: one tile driver for both convolutions (`conv/driver.rs`:
//! im2col, bias, GEMM, scatter) and one body for the packed matmuls
//! (`matmul/packed.rs`) call each precision's own steps (`ConvPrecision`,
//! `MatmulPrecision`), as XNNPACK's operators call the gemm config of a data
//! type.
//!
//! Adding a precision (fp16, say): its rows in [`table::TABLE`], a type with
//! these traits (packing the weights and activations, calling its
//! micro-kernels), and its registered names; the drivers do not change.
use tvm_ffi::{Result, TensorView};

use crate::gemm::packed::Kind;
use crate::scratch::Scratch;

#[cfg(test)]
pub(crate) mod bench;
pub mod table;

/// What every operator needs to know of a precision.
pub(crate) trait Precision: Sync + 'static {
    /// Its name in the table (`f32`, `bf16`, `int8`).
    const NAME: &'static str;
    /// Columns of a panel of packed weights: the driver rounds tiles and
    /// blocks of output channels to whole panels (1: torch's own layout).
    const PANEL: usize;
    /// The weights of one call (every group) as the kernels read them.
    type Weights<'w>: ?Sized + Sync;

    /// Whether the kernels compute in this precision here (its row in the
    /// table is its own micro-kernel, not the portable loop).
    fn native() -> bool {
        table::native(Self::NAME)
    }

    /// `run` on the weights of a call (`w`, of `kind` with torch's shape
    /// `w_shape` before packing, in `groups`), after checking them.
    fn with_call_weights<R>(
        who: &str,
        w: &TensorView,
        kind: Kind,
        groups: usize,
        w_shape: &[usize],
        run: impl FnOnce(&Self::Weights<'_>) -> Result<R>,
    ) -> Result<R>;

    /// Whether `w` holds the weights of torch's shape `w_shape` (of `kind`,
    /// in `groups`).
    fn weights_fit(w: &Self::Weights<'_>, kind: Kind, groups: usize, w_shape: &[usize]) -> bool;

    /// `w` (`kind`'s weights of torch's shape `w_shape`, in `groups`) in
    /// torch's f32 layout, into `dst` of the same length.
    fn unpack_f32(
        w: &Self::Weights<'_>,
        kind: Kind,
        groups: usize,
        w_shape: &[usize],
        dst: &mut [f32],
    );
}

/// `run` on `w` unpacked to f32 in torch's layout: where the precision is not
/// native, its kernels run the f32 ones on these.
pub(crate) fn with_f32_weights<P: Precision, R>(
    w: &P::Weights<'_>,
    kind: Kind,
    groups: usize,
    w_shape: &[usize],
    run: impl FnOnce(&[f32]) -> R,
) -> R {
    let mut f32_w = Scratch::new();
    f32_w.set_len(w_shape.iter().product());
    P::unpack_f32(w, kind, groups, w_shape, &mut f32_w);
    run(&f32_w)
}
