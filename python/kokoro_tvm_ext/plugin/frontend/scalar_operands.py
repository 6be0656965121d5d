"""``add`` / ``sub`` / ``mul`` / ``div`` of a tensor and a symbolic size.

``x / x.shape[1]``, ``x * (x.shape[1] / 2)`` and the index arithmetic of a
nearest ``interpolate(scale_factor=...)`` on a dynamic length multiply a
float32 tensor by an int64 or float64 PrimExpr. Stock TVM passes the PrimExpr
through as it is, and Relax refuses the mixed dtypes: "TypeError: Binary
operators must have the same datatype for both operands. However,
R.divide(x, s27) uses datatype T.float32 on the LHS [...] and datatype T.int64
on the RHS".

PyTorch treats the size as a Python scalar: the result has the tensor's dtype
(or the default float dtype for an int tensor and a float scalar), and the
scalar is converted to that dtype. We do the same: both operands are cast to
the dtype torch.export recorded for the result. Nodes without a symbolic
operand go to TVM's own conversion.
"""

from __future__ import annotations

import operator

import tvm
from tvm import relax, tirx

from kokoro_tvm_ext.plugin.frontend.common import output_dtype, tensor_dtype
from kokoro_tvm_ext.plugin.frontend.registry import converter


def _is_symbolic_scalar(value) -> bool:
    return tvm.ir.is_prim_expr(value) and not isinstance(value, (tirx.IntImm, tirx.FloatImm))


def _operand(bb, value, dtype: str):
    if _is_symbolic_scalar(value):
        return value if str(value.ty) == dtype else tirx.Cast(dtype, value)
    if isinstance(value, (bool, int, float)):
        return relax.const(value, dtype)
    if tensor_dtype(value) != dtype:
        return bb.emit(relax.op.astype(value, dtype))
    return value


def _binary(relax_op, python_op):
    def convert(node, importer):
        args = importer.retrieve_args(node)
        lhs, rhs = args[0], args[1]
        alpha = node.kwargs.get("alpha", 1)
        if not (_is_symbolic_scalar(lhs) or _is_symbolic_scalar(rhs)) or alpha != 1:
            return importer._binary_op(relax_op, python_op)(node)  # TVM's own conversion
        dtype = output_dtype(node)
        bb = importer.block_builder
        return bb.emit(relax_op(_operand(bb, lhs, dtype), _operand(bb, rhs, dtype)))

    return convert


add = converter("add.Tensor", "add.Scalar")(_binary(relax.op.add, operator.add))
sub = converter("sub.Tensor", "sub.Scalar")(_binary(relax.op.subtract, operator.sub))
mul = converter("mul.Tensor", "mul.Scalar")(_binary(relax.op.multiply, operator.mul))
div = converter("div.Tensor", "div.Scalar")(_binary(relax.op.divide, operator.truediv))


__all__ = ["add", "div", "mul", "sub"]
