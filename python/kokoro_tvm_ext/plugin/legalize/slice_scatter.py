"""``relax.slice_scatter`` with symbolic bounds and sizes.

``x[:, 1:1 + y.shape[1]] = y`` or ``out[:, -2:] = 0`` on a dynamic length
exports as ``aten.slice_scatter``; TVM's importer maps it to
``relax.slice_scatter``, whose stock legalization (``topi.slice_scatter``)
needs a constant axis length and constant bounds: ``ValueError: Expect value
to be constant int``. Its source index is also clamped to the *input's*
length rather than the source's, so a masked-out position may read past the
end of ``src``.

Ours is one elementwise compute that works for any PrimExpr bounds:
``out[..., j, ...] = src[..., (j - start) // step, ...]`` where ``j`` is in the
slice (``start <= j < end`` and ``(j - start) % step == 0``), else
``input[..., j, ...]``. Bounds are clamped to ``[0, len]`` as torch does, and
the source index is clamped to the source, so nothing reads out of bounds.
"""

from __future__ import annotations

import tvm
from tvm import te, tirx

# TVM registers its own at the default level 10; a higher level takes precedence.
PRIORITY_LEVEL = 11


def _as_int64(value) -> tirx.PrimExpr:
    if isinstance(value, int):
        return tirx.IntImm("int64", value)
    return value if str(value.ty) == "int64" else tirx.Cast("int64", value)


def slice_scatter_te(data: te.Tensor, src: te.Tensor, start, end, step, axis: int) -> te.Tensor:
    """``data`` with ``src`` written into ``data[..., start:end:step, ...]`` along ``axis``."""
    axis = axis % len(data.shape)
    length = _as_int64(data.shape[axis])
    zero = tirx.IntImm("int64", 0)
    start = tirx.max(tirx.min(_as_int64(start), length), zero)
    end = tirx.max(tirx.min(_as_int64(end), length), start)
    step = _as_int64(step)
    last = _as_int64(src.shape[axis]) - 1

    def value(*idx):
        j = _as_int64(idx[axis])
        offset = j - start
        inside = tirx.all(j >= start, j < end, tirx.floormod(offset, step) == 0)
        src_idx = list(idx)
        src_idx[axis] = tirx.max(tirx.min(tirx.floordiv(offset, step), last), zero)
        return tirx.if_then_else(inside, src(*src_idx), data(*idx))

    return te.compute(data.shape, value, name="slice_scatter")


def legalize_slice_scatter(bb, call):
    data, src, start, end, step = call.args
    return bb.call_te(
        slice_scatter_te,
        data,
        src,
        start,
        end,
        step,
        int(call.attrs.axis),
        primfunc_name_hint="slice_scatter",
    )


tvm.ir.register_op_attr("relax.slice_scatter", "FLegalize", legalize_slice_scatter, level=PRIORITY_LEVEL)

__all__ = ["legalize_slice_scatter", "slice_scatter_te"]
