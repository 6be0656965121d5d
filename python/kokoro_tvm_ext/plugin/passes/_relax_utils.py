"""Helpers the passes share: reading types and bindings, counting uses, the per-function loop.

Passes import from here, never from a sibling pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, PyExprVisitor, visitor
from tvm.sym import Analyzer

CUMSUM = tvm.ir.Op.get("relax.cumsum")


def shape_of(expr) -> list | None:
    """The dims of a tensor-typed ``expr`` (PrimExprs), or None when its shape is not known."""
    ty = expr.ty
    if isinstance(ty, relax.TensorType) and isinstance(ty.shape, relax.ShapeExpr):
        return list(ty.shape.values)
    return None


def is_f32(expr) -> bool:
    ty = expr.ty
    return isinstance(ty, relax.TensorType) and str(ty.dtype) == "float32"


def same_shape(a, b, analyzer: Analyzer) -> bool:
    """Whether two shapes (lists of PrimExpr) are provably equal, dim by dim."""
    if a is None or b is None or len(a) != len(b):
        return False
    return all(analyzer.can_prove_equal(x, y) for x, y in zip(a, b))


def is_one(dim) -> bool:
    return isinstance(dim, tvm.tirx.IntImm) and int(dim) == 1


def scalar_value(expr) -> float | None:
    """The value of a constant with one element (any rank), else None."""
    if not (isinstance(expr, tvm.ir.GenericConst) and isinstance(expr.value, tvm.runtime.Tensor)):
        return None
    array = expr.value.numpy()
    return float(array.reshape(())) if array.size == 1 else None


def in_scope(source, var) -> bool:
    """Whether ``source``, read from ``var``'s binding, is visible wherever ``var`` is.

    A dataflow var is only visible in its own block; a plain ``var`` may be
    used in later blocks, where its binding's dataflow inputs are not.
    """
    return isinstance(var, relax.DataflowVar) or not isinstance(source, relax.DataflowVar)


@visitor
class UseCounter(PyExprVisitor):
    """How often each variable is read (``counts``), the value bound to each (``values``), in binding
    order (``order``). Run it with ``UseCounter.of(func)``."""

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()
        self.values: dict = {}
        self.order: list = []

    @staticmethod
    def of(func: relax.Function) -> UseCounter:
        uses = UseCounter()
        uses.visit_expr(func)
        return uses

    def visit_var_(self, var):
        self.counts[var] += 1

    def visit_dataflow_var_(self, var):
        self.counts[var] += 1

    def visit_var_binding_(self, binding):
        self.values[binding.var] = binding.value
        self.order.append(binding.var)
        super().visit_var_binding_(binding)


def upstream_of_cumsum(func: relax.Function) -> dict:
    """The bound values (by hash) that a cumsum of ``func`` depends on; test with :func:`is_among`."""
    bound = {}
    for block in getattr(func.body, "blocks", []):
        for binding in block.bindings:
            bound[binding.var] = binding.value
    todo = [
        v
        for value in bound.values()
        if isinstance(value, relax.Call) and value.op == CUMSUM
        for v in relax.analysis.free_vars(value)
    ]
    seen = set()
    while todo:
        var = todo.pop()
        if var in seen or var not in bound:
            continue
        seen.add(var)
        todo.extend(relax.analysis.free_vars(bound[var]))
    return {hash(bound[v]): bound[v] for v in seen}


def is_among(calls: dict, call) -> bool:
    """Whether ``call`` is one of ``calls`` (as made by :func:`upstream_of_cumsum`)."""
    found = calls.get(hash(call))
    return found is not None and found.same_as(call)


def bound_constant(mutator: PyExprMutator, expr):
    """The constant ``expr`` is bound to, through any variables, else None."""
    while isinstance(expr, relax.Var):
        expr = mutator.lookup_binding(expr)
    return expr if isinstance(expr, tvm.ir.Constant) else None


def map_functions(mod: tvm.IRModule, rewrite: Callable) -> tvm.IRModule:
    """``mod`` with ``rewrite(gvar, func)`` applied to each Relax function.

    ``rewrite`` returns the new function, or None (or ``func`` itself) to keep
    it. ``mod`` is not modified: a copy holds the changes, and ``mod`` itself is
    returned when nothing changed.
    """
    updates = {}
    for gvar, func in mod.functions_items():
        if isinstance(func, relax.Function):
            new = rewrite(gvar, func)
            if new is not None and not new.same_as(func):
                updates[gvar] = new
    if not updates:
        return mod
    mod = mod.clone()
    for gvar, func in updates.items():
        mod[gvar] = func
    return mod
