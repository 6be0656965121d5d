"""``aten.slice.Tensor`` that keeps symbolic shapes.

Stock TVM emits ``strided_slice(assume_inbound=False)`` with torch's raw
bounds. On a symbolic axis Relax cannot clip them at compile time, so the
result's shape becomes unknown (``R.Tensor(ndim=3)``), and the next reshape
with a -1 fails ("Reshape expects the input tensor to have known shape"),
or the build fails late. That hits ``x[..., 1:-1]`` and ``x[..., -1:]``.
A static axis sliced by a symbolic bound loses its shape the same way:
BERT's ``position_ids[:, :T]`` (a [1, 512] buffer) becomes ``R.Tensor(ndim=2)``
and the build fails at the embedding add: "CodeGenVM cannot emit this Relax
operator directly. [...] Offending call: R.add(lv3, lv8)".

torch.export already knows the slice's exact length, simplified with the
export's range constraints. We normalise the start (a negative start counts
from the end), take that length from the node's recorded output shape, and
emit an in-bounds ``strided_slice`` whose result is cast to exactly that shape.
"""

from __future__ import annotations

from tvm import relax, sym, tirx

from kokoro_tvm_ext.plugin.frontend.registry import converter
from kokoro_tvm_ext.plugin.frontend.symbolic import has_min_max, to_prim


def _arg(node, index, key, default):
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(key, default)


@converter("slice.Tensor")
def slice_tensor(node, importer):
    bb = importer.block_builder
    x = importer.env[node.args[0]]
    shape = x.ty.shape
    ndim = x.ty.ndim
    dim = _arg(node, 1, "dim", 0)
    start = _arg(node, 2, "start", None)
    end = _arg(node, 3, "end", None)
    step = _arg(node, 4, "step", 1)
    if shape is None or ndim < 0 or not isinstance(step, int) or step < 1:
        return importer._slice(node)  # TVM's own conversion
    dim = dim % ndim
    length = shape[dim]
    if isinstance(length, tirx.IntImm) and not _is_node(start) and not _is_node(end):
        return importer._slice(node)  # static axis and bounds: TVM's own conversion is exact
    out_shape = list(shape)
    try:
        out_shape[dim] = to_prim(importer, node.meta["val"].shape[dim])
        if start is None:
            begin = tirx.IntImm("int64", 0)
        elif isinstance(start, int):
            if start >= 0:
                begin = tirx.IntImm("int64", start)
            else:
                begin = length + start
                if has_min_max(node.meta["val"].shape[dim]):  # torch clamps at 0
                    begin = tirx.max(begin, tirx.IntImm("int64", 0))
        else:
            begin = to_prim(importer, start)
    except (KeyError, NotImplementedError, TypeError):
        # e.g. a data-dependent (unbacked) size that no input dimension defines
        return importer._slice(node)
    analyzer = sym.Analyzer()
    out_len = analyzer.simplify(out_shape[dim])
    begin = analyzer.simplify(begin)

    if step == 1 and analyzer.can_prove_equal(begin, 0) and analyzer.can_prove_equal(out_len, length):
        return x
    # Last index read is begin + (out_len - 1) * step; ``end`` stops right after it.
    end = analyzer.simplify(begin + (out_len - 1) * step + 1) if step > 1 else analyzer.simplify(begin + out_len)
    sliced = bb.emit(relax.op.strided_slice(x, [dim], [begin], [end], [step], assume_inbound=True))
    return _with_shape(bb, sliced, out_shape, x.ty.dtype)


def _is_node(value) -> bool:
    """Whether a bound is computed in the graph (an fx.Node), e.g. ``x.shape[1]``."""
    return hasattr(value, "op")


def _with_shape(bb, expr, shape, dtype):
    """``expr`` with its shape stated as ``shape`` (a no-op cast when Relax already agrees)."""
    inferred = expr.ty.shape
    if inferred is not None and len(inferred) == len(shape):
        analyzer = sym.Analyzer()
        if all(analyzer.can_prove_equal(a, b) for a, b in zip(inferred, shape)):
            return expr
    return bb.match_cast(expr, relax.TensorType(shape, dtype))


__all__ = ["slice_tensor"]
