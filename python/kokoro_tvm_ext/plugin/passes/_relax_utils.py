"""Helpers the passes share: reading types and bindings, counting uses, the per-function loop.

Passes import from here, never from a sibling pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor
from tvm.sym import Analyzer

from kokoro_tvm_ext.plugin.kernels import KernelCall

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


# -- weights handed to a packing function -------------------------------------------
# A weight handed to one of our packing functions (``kokoro_tvm_ext.pack_winograd``, ``pack_bf16``).
#
# Two kinds of weight reach a kernel call:
#
# - a constant (a model imported with its weights bound): packed now, the packed
#   tensor becomes the new constant;
# - a value computed from the function's weight parameters alone (imported with
#   ``keep_params_as_input=True``, the parameters after ``num_input``): the packing
#   becomes a pure call in the graph, which ``relax.transform.LiftTransformParams``
#   moves into the function's ``transform_params``, so the compiled library packs
#   any checkpoint of the same shapes when it is loaded.
#
# A weight that depends on a run-time input is neither, and stays unpacked.


def weight_params(func: relax.Function) -> frozenset:
    """The parameters of ``func`` that are weights: those after its ``num_input`` attribute, if set."""
    count = func.attrs.get("num_input") if func.attrs is not None else None
    return frozenset() if count is None else frozenset(func.params[int(count) :])


class WeightPacker:
    """Packs weights for one function's mutator (see module doc); ``pack(expr, function, *args)``."""

    def __init__(self, mutator: PyExprMutator, func: relax.Function):
        self.mutator = mutator
        self.weights = weight_params(func)
        self._only_weights: dict = {}
        self._packed_types: dict = {}

    def weight_type(self, expr) -> tuple[list[int], str] | None:
        """(shape, dtype) of ``expr`` if it is a constant or computed from the weights alone, else None."""
        const = bound_constant(self.mutator, expr)
        if const is not None:
            return [int(d) for d in const.value.shape], str(const.value.dtype)
        dims = shape_of(expr)
        if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims) or not self._from_weights(expr):
            return None
        return [int(d) for d in dims], str(expr.ty.dtype)

    def pack(self, expr, function: str, *args):
        """``function(*args, weight)`` for the weight ``expr``: a constant now, or a pure call to lift."""
        packer = tvm.get_global_func(function)
        const = bound_constant(self.mutator, expr)
        if const is not None:
            return relax.const(packer(*args, const.value))
        shape, dtype = self.weight_type(expr)
        key = (function, args, tuple(shape), dtype)
        if key not in self._packed_types:  # the packed layout's type, from packing zeros of this shape once
            sample = packer(*args, tvm.runtime.tensor(np.zeros(shape, dtype=dtype)))
            self._packed_types[key] = relax.TensorType([int(d) for d in sample.shape], str(sample.dtype))
        call = relax.call_pure_packed(function, *args, expr, ty_args=self._packed_types[key])  # str, int: converted
        return self.mutator.builder_.emit(call, "packed_weight")

    def _from_weights(self, expr) -> bool:
        """Whether ``expr``'s value depends on the weight parameters and constants alone."""
        todo, seen = [expr], []
        while todo:
            current = todo.pop()
            if isinstance(current, relax.Var):
                if current in self.weights:
                    continue
                cached = self._only_weights.get(current)
                if cached is False:
                    return False
                if cached is True or any(current.same_as(s) for s in seen):
                    continue
                seen.append(current)
                try:
                    bound = self.mutator.lookup_binding(current)
                except Exception:  # noqa: BLE001 - unbound: a run-time input
                    bound = None
                if bound is None:
                    self._only_weights[current] = False
                    return False
                todo.extend(relax.analysis.free_vars(bound))
            else:
                todo.extend(relax.analysis.free_vars(current))
        for var in seen:
            self._only_weights[var] = True
        return True


# -- f32 kernel calls moved to packed-weight variants ------------------------------
# What the packing passes share (pack_bf16.py, pack_int8.py, pack_f32.py): the plugin's f32
# conv1d / conv1d_transpose / matmul calls with constant weights (or weights computed
# from the weight parameters alone, see WeightPacker) move to a variant
# ``{kernel}{suffix}`` whose weights a registered packer transformed once, at compile
# time. Calls that stay f32, whatever the precision:
#
# - grouped convolutions (depthwise ones run a direct loop, not a GEMM) and weights
#   that are not f32 constants;
# - calls upstream of a cumulative sum: an error there is integrated, and grows with
#   the input's length (in Kokoro, the F0 predictor, whose output SineGen integrates
#   into the phase of its sines; see pack_bf16.py);
# - every call in a function whose attribute ``kokoro_tvm_ext.precision`` is "fp32"
#   (compile_kokoro keeps the text stage, which rounds durations to whole frames, in f32).

PRECISION_ATTR = "kokoro_tvm_ext.precision"

# The f32 kernels with packed-weight variants (named ``{kernel}{suffix}``, packed as kind ``{kernel}``).
PACKED_KERNELS = ("conv1d", "conv1d_transpose", "matmul")


@mutator
class _ToPacked(PyExprMutator):
    def __init__(self, mod, func, keep_f32: dict, packer: str, suffix: str, min_channels: int, kernels: tuple):
        super().__init__(mod)
        self.weights = WeightPacker(self, func)
        self.keep_f32 = keep_f32
        self.packer = packer
        self.suffix = suffix
        self.min_channels = min_channels
        self.kernels = kernels

    def visit_call_(self, call):
        keep = is_among(self.keep_f32, call)
        call = super().visit_call_(call)
        if keep:
            return call
        kernel = KernelCall.read(call)
        if kernel is None or kernel.name not in self.kernels:
            return call
        groups = kernel.args.get("groups", 1)  # matmul has none
        found = self.weights.weight_type(kernel["w"])
        if found is None or groups != 1 or found[1] != "float32":
            return call
        if min(found[0][:2]) < self.min_channels:  # w's first two dims: the channels (matmul: K, N)
            return call
        packed = self.weights.pack(kernel["w"], self.packer, kernel.name, groups)
        # The packed convolutions take the kernel size too.
        size = {} if kernel.name == "matmul" else {"kernel_size": found[0][-1]}
        return kernel.to(f"{kernel.name}{self.suffix}", w=packed, **size)


def pack_kernels(
    mod: tvm.IRModule,
    precision: str,
    packer: str,
    suffix: str,
    min_channels: int = 0,
    kernels: tuple = PACKED_KERNELS,
) -> tvm.IRModule:
    """``mod`` with the calls described above moved to ``{kernel}{suffix}``, their weights packed
    by the global function ``packer``; functions marked f32 are left alone, and so are calls
    with fewer than ``min_channels`` input or output channels, and kernels not in ``kernels``.
    With ``precision="fp32"`` (a packed f32 layout, no rounding) every function and call is taken."""
    rounds = precision != "fp32"

    def rewrite(_gvar, func):
        if rounds and func.attrs is not None and str(func.attrs.get(PRECISION_ATTR, precision)) == "fp32":
            return None
        keep = upstream_of_cumsum(func) if rounds else {}
        return _ToPacked(mod, func, keep, packer, suffix, min_channels, kernels).visit_expr(func)

    return map_functions(mod, rewrite)
