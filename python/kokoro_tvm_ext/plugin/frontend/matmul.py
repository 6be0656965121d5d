"""``mm`` / ``bmm`` / ``matmul`` / ``addmm`` / ``linear`` that keep their input dtype.

Stock TVM 0.27 emits all of them with ``out_dtype="float32"``, so float64
products are computed in float32 (and float16 or integer products come back
as float32). We emit them with torch's own result dtype; float32 nodes go to
TVM's own conversion unchanged. Kokoro's float64 harmonic source merges its
harmonics with a linear layer, exported as ``bmm``.
"""

from __future__ import annotations

import operator
from functools import partial

from tvm import relax

from kokoro_tvm_ext.plugin.frontend.common import output_dtype
from kokoro_tvm_ext.plugin.frontend.registry import converter


def _delegate_or(node, importer, own, emit):
    dtype = output_dtype(node)
    if dtype == "float32":
        return own(node)
    return emit(dtype)


@converter("mm.default", "bmm.default", "matmul.default")
def matmul(node, importer):
    def emit(dtype):
        a, b = importer.env[node.args[0]], importer.env[node.args[1]]
        return importer.block_builder.emit(relax.op.linear_algebra.matmul(a, b, out_dtype=dtype))

    return _delegate_or(node, importer, lambda n: _tvm_binary_matmul(importer, n), emit)


def _tvm_binary_matmul(importer, node):
    # What TVM registers for these names, rebuilt (our entries shadow TVM's in
    # importer.convert_map, so it cannot simply be looked up there).
    return importer._binary_op(partial(relax.op.linear_algebra.matmul, out_dtype="float32"), operator.matmul)(node)


@converter("addmm.default")
def addmm(node, importer):
    def emit(dtype):
        bb = importer.block_builder
        x = importer.env[node.args[0]]
        a, b = importer.env[node.args[1]], importer.env[node.args[2]]
        alpha = node.kwargs.get("alpha", 1)
        beta = node.kwargs.get("beta", 1)
        out = None
        if alpha != 0:
            out = bb.emit(relax.op.linear_algebra.matmul(a, b, out_dtype=dtype))
            if alpha != 1:
                out = bb.emit(relax.op.multiply(out, relax.const(alpha, dtype)))
        if beta != 0:
            bias = x if beta == 1 else bb.emit(relax.op.multiply(x, relax.const(beta, dtype)))
            out = bias if out is None else bb.emit(relax.op.add(bias, out))
        return out

    return _delegate_or(node, importer, importer._addmm, emit)


@converter("linear.default")
def linear(node, importer):
    def emit(dtype):
        args = importer.retrieve_args(node)
        bias = args[2] if len(args) > 2 else None
        return importer.block_builder.emit(relax.op.linear(args[0], args[1], bias, dtype))

    return _delegate_or(node, importer, importer._linear, emit)
