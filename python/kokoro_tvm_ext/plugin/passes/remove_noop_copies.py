"""Drop data movement that provably changes nothing.

torch.export spells one symbolic size in several ways (``s6*120 + 1`` here,
``1 + 120*s6`` there), so Kokoro's IR holds reshapes from a shape to the same
shape written differently. TVM legalizes such a reshape to a copy with a div
and a mod per element, and when its index pattern is too tangled for
``RewriteDataflowReshape`` to recognise, the copy runs (24 times per
utterance over the generator's largest tensors). The same holds for a
``broadcast_to`` to the shape the tensor already has, an identity
``permute_dims`` and an ``astype`` to the dtype it already has.

Each such binding is removed and its uses read the input instead. Shapes are
compared with TVM's arithmetic analyzer, so ``s6*120 + 1`` equals
``1 + 120*s6``.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.sym import Analyzer

from kokoro_tvm_ext.plugin.passes._relax_utils import in_scope, map_functions, same_shape, shape_of

RESHAPE = tvm.ir.Op.get("relax.reshape")
BROADCAST_TO = tvm.ir.Op.get("relax.broadcast_to")
PERMUTE_DIMS = tvm.ir.Op.get("relax.permute_dims")
ASTYPE = tvm.ir.Op.get("relax.astype")


def is_noop(call: relax.Call, analyzer: Analyzer) -> bool:
    """Whether ``call`` returns its first argument unchanged."""
    if not isinstance(call, relax.Call) or not call.args:
        return False
    x = call.args[0]
    x_ty, out_ty = x.ty, call.ty
    if not (isinstance(x_ty, relax.TensorType) and isinstance(out_ty, relax.TensorType)):
        return False
    if str(x_ty.dtype) != str(out_ty.dtype):
        return False
    if call.op in (RESHAPE, BROADCAST_TO, ASTYPE):
        return same_shape(shape_of(x), shape_of(call), analyzer)
    if call.op == PERMUTE_DIMS:
        axes = call.attrs.axes
        return axes is None or [int(a) for a in axes] == list(range(len(axes)))
    return False


@mutator
class _Remover(PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.analyzer = Analyzer()

    def visit_var_binding_(self, binding):
        value = binding.value
        inner = self._permute_source(value)
        if inner is not None:
            # permute(permute(x, a), b) with b undoing a is x. (Other pairs stay:
            # FuseOps makes them one copy anyway, and a lone swap of the last two
            # axes is what the batch_matmul dispatch reads through strides.)
            a, b = [int(i) for i in inner.attrs.axes], [int(i) for i in value.attrs.axes]
            if [a[i] for i in b] == list(range(len(a))):
                value = relax.op.permute_dims(inner.args[0], list(range(len(a))))
                binding = relax.VarBinding(binding.var, value)
        if isinstance(value, relax.Call) and value.args and isinstance(value.args[0], relax.Var):
            call = relax.Call(value.op, [self.visit_expr(value.args[0]), *value.args[1:]], value.attrs)
            call = self.builder_.normalize(call)
            source = call.args[0]
            # A plain var must not be replaced by a dataflow var (it would escape its block).
            if is_noop(call, self.analyzer) and in_scope(source, binding.var):
                self.set_var_remap(binding.var, source)
                return
        super().visit_var_binding_(binding)

    def _permute_source(self, value):
        """The inner call if ``value`` is a permute_dims of a permute_dims, both with axes."""
        if not (isinstance(value, relax.Call) and value.op == PERMUTE_DIMS and value.attrs.axes is not None):
            return None
        x = value.args[0]
        inner = self.lookup_binding(self.visit_expr(x)) if isinstance(x, relax.Var) else None
        if not (isinstance(inner, relax.Call) and inner.op == PERMUTE_DIMS and inner.attrs.axes is not None):
            return None
        # The inner input must be visible here: x from this block, or a plain var.
        return inner if in_scope(inner.args[0], x) else None


@tvm.transform.module_pass(opt_level=0, name="RemoveNoOpCopies")
class RemoveNoOpCopies:
    """Drop the reshapes, broadcasts, permutes and casts that provably change nothing (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _Remover(mod).visit_expr(func))
