"""Fold a bias add into the plugin kernel call that produces its input.

Every torch ``Conv1d`` / ``ConvTranspose1d`` / ``Linear`` with a bias imports
as the bare product followed by ``R.add(y, R.reshape(b, [1, C, 1]))`` (or
``R.add(b, y)`` for linear layers). Left alone, TVM runs that add as one more
pass over the product's output, the vocoder's largest tensors. The kernels
already take a bias (they prefill the output with it), so

    y = call_dps_packed("kokoro_tvm_ext.conv1d", (..., has_bias=0, x, w))
    z = R.add(y, bias)            # y used nowhere else

becomes ``z = call_dps_packed("kokoro_tvm_ext.conv1d", (..., has_bias=1, x, w,
reshape(bias, [C])))``. A bias is anything of shape ``[1, C, 1]`` / ``[C, 1]``
for the convolutions (``[B, C, L]`` outputs) and ``[N]`` / ``[1, ..., 1, N]``
for matmul (``[..., N]`` outputs), that does not make the add broadcast the
product to a larger shape. Runs right after DispatchToPluginKernels; the
product left dead is removed by DeadCodeElimination.
"""
from __future__ import annotations

from collections import Counter

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor
from tvm.sym import Analyzer

ADD = tvm.ir.Op.get("relax.add")
CALL_DPS_PACKED = tvm.ir.Op.get("relax.call_dps_packed")

# kernel -> (index of has_bias among the packed arguments, where the bias goes,
#            channel axis of the output counted from the end)
KERNELS = {
    "kokoro_tvm_ext.conv1d": (5, 8, 2),
    "kokoro_tvm_ext.conv1d_transpose": (6, 9, 2),
    "kokoro_tvm_ext.matmul": (0, 3, 1),
}


@visitor
class _UseCounter(PyExprVisitor):
    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def visit_var_(self, var):
        self.counts[var] += 1

    def visit_dataflow_var_(self, var):
        self.counts[var] += 1


def _shape(expr):
    ty = expr.ty
    if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
        return list(ty.shape.values)
    return None


def _kernel_without_bias(expr):
    """(name, packed args) if ``expr`` is a plugin kernel call that takes a bias but has none."""
    if not (isinstance(expr, relax.Call) and expr.op == CALL_DPS_PACKED):
        return None
    callee, args = expr.args[0], expr.args[1]
    if not isinstance(callee, relax.ExternFunc) or not isinstance(args, relax.Tuple):
        return None
    name = str(callee.global_symbol)
    if name not in KERNELS:
        return None
    flag = args.fields[KERNELS[name][0]]
    if int(getattr(flag, "value", -1)) != 0:
        return None
    return name, list(args.fields)


def _bias_length(bias, out_shape, axis_from_end: int, analyzer: Analyzer):
    """The channel count if ``bias`` broadcasts onto ``out_shape`` along its channel axis only."""
    shape = _shape(bias)
    if shape is None or out_shape is None or not 1 <= len(shape) <= len(out_shape):
        return None
    if not (isinstance(bias.ty, relax.TensorType) and str(bias.ty.dtype) == "float32"):
        return None
    channels = out_shape[len(out_shape) - axis_from_end]
    padded = [1] * (len(out_shape) - len(shape)) + shape
    for i, d in enumerate(padded):
        want = channels if i == len(out_shape) - axis_from_end else 1
        if not analyzer.can_prove_equal(d, want):
            return None
    return channels


@mutator
class _BiasFolder(PyExprMutator):
    def __init__(self, mod, uses: Counter):
        super().__init__(mod)
        self.uses = uses
        self.analyzer = Analyzer()
        self.block_vars: set = set()  # bound so far in the current block

    def visit_binding_block_(self, block):
        self.block_vars = set()
        return super().visit_binding_block_(block)

    def visit_dataflow_block_(self, block):
        self.block_vars = set()
        return super().visit_dataflow_block_(block)

    def visit_var_binding_(self, binding):
        super().visit_var_binding_(binding)
        self.block_vars.add(binding.var)

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if call.op != ADD or len(call.args) != 2:
            return call
        out_shape = _shape(call)
        for product, bias in (call.args, call.args[::-1]):
            # The kernel call moves to the add: only within one block, where its
            # inputs are still in scope.
            if product not in self.block_vars or self.uses.get(product, 0) != 1:
                continue
            kernel = _kernel_without_bias(self.lookup_binding(product))
            if kernel is None:
                continue
            name, args = kernel
            flag_index, bias_index, axis = KERNELS[name]
            product_shape = _shape(product)
            if out_shape is None or product_shape is None or len(out_shape) != len(product_shape):
                continue
            if not all(self.analyzer.can_prove_equal(a, b) for a, b in zip(out_shape, product_shape)):
                continue
            channels = _bias_length(bias, product_shape, axis, self.analyzer)
            if channels is None:
                continue
            args[flag_index] = relax.prim_value(1)
            args.insert(bias_index, relax.op.reshape(bias, [channels]))
            return relax.op.call_dps_packed(name, relax.Tuple(args), out_ty=call.ty)
        return call


@tvm.transform.module_pass(opt_level=0, name="FoldBiasIntoKernels")
def FoldBiasIntoKernels(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    updates = {}
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            counter = _UseCounter()
            counter.visit_expr(func)
            updates[gv] = _BiasFolder(mod, counter.counts).visit_expr(func)
    for gv, func in updates.items():
        mod[gv] = func
    return mod
