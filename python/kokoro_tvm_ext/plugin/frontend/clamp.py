"""``aten.clamp`` / ``clamp_min`` / ``clamp_max`` with scalar, tensor or missing bounds.

Stock TVM clips with ±infinity for a missing bound, which fails to build for
integer tensors ("Cannot convert infinity to BigInt"). We use the dtype's own
range instead, and honour torch's result-type promotion (an int tensor clamped
by a float bound yields a float tensor).
"""

from __future__ import annotations

import tvm
from tvm import relax

from kokoro_tvm_ext.plugin.frontend.common import dtype_limits, output_dtype, tensor_dtype
from kokoro_tvm_ext.plugin.frontend.registry import converter


def _bound(importer, node, index: int, key: str):
    if len(node.args) > index:
        return importer.retrieve_args(node)[index]
    value = node.kwargs.get(key)
    return importer.env[value] if hasattr(value, "op") else value


def _emit_clamp(importer, node, x, lo, hi):
    bb = importer.block_builder
    dtype = output_dtype(node)
    if tensor_dtype(x) != dtype:
        x = bb.emit(relax.op.astype(x, dtype))
    lo_limit, hi_limit = dtype_limits(dtype)
    # Tensor and symbolic-size bounds become elementwise maximum/minimum.
    if isinstance(lo, relax.Expr):
        x = bb.emit(relax.op.maximum(x, _as_tensor(bb, lo, dtype)))
        lo = None
    if isinstance(hi, relax.Expr):
        x = bb.emit(relax.op.minimum(x, _as_tensor(bb, hi, dtype)))
        hi = None
    lo = lo_limit if lo is None else lo
    hi = hi_limit if hi is None else hi
    if lo == lo_limit and hi == hi_limit:
        return x
    return bb.emit(relax.op.clip(x, lo, hi))


def _as_tensor(bb, bound: relax.Expr, dtype: str) -> relax.Expr:
    if isinstance(bound.ty, relax.TensorType):
        if str(bound.ty.dtype) != dtype:
            bound = bb.emit(relax.op.astype(bound, dtype))
        return bound
    if isinstance(bound.ty, tvm.ir.PrimType):
        # A symbolic size (e.g. ``x.shape[0] - 8``): a 0-d tensor holding its value.
        as_shape = relax.ShapeExpr([tvm.tirx.Cast("int64", bound)])
        scalar = bb.emit(relax.op.reshape(relax.op.shape_to_tensor(as_shape), []))
        return bb.emit(relax.op.astype(scalar, dtype))
    raise TypeError(f"clamp: unsupported bound {bound} of type {bound.ty}")


@converter("clamp.default", "clamp.Tensor", "clip.default", "clip.Tensor")
def clamp(node, importer):
    x = importer.env[node.args[0]]
    return _emit_clamp(importer, node, x, _bound(importer, node, 1, "min"), _bound(importer, node, 2, "max"))


@converter("clamp_min.default", "clamp_min.Tensor")
def clamp_min(node, importer):
    x = importer.env[node.args[0]]
    return _emit_clamp(importer, node, x, _bound(importer, node, 1, "min"), None)


@converter("clamp_max.default", "clamp_max.Tensor")
def clamp_max(node, importer):
    x = importer.env[node.args[0]]
    return _emit_clamp(importer, node, x, None, _bound(importer, node, 1, "max"))
