"""Send AdaIN chains (with Snake or leaky_relu after them) to the fused Rust kernel.

Kokoro's ``AdaIN1d`` imports as

    n = R.nn.instance_norm(x, w, b, channel_axis=1, axes=[0, 2], ...)   # x [B, C, L]
    y = R.add(R.multiply(scale, n), shift)            # scale = 1 + gamma, [B, C, 1]

and the vocoder's ``AdaINResBlock1`` follows it with Snake,

    z = R.add(y, R.multiply(inv, R.power(R.sin(R.multiply(alpha, y)), 2.0)))
    # inv = R.divide(1.0, alpha), possibly times 1.0

while ``AdainResBlk1d`` (F0/N predictor, decoder) follows it with
``R.nn.leakyrelu(y, slope)``. TVM runs each chain as two reductions plus an
element-wise kernel calling scalar ``sinf``, about a third of the audio stage.
The whole chain becomes one ``call_dps_packed`` to ``kokoro_tvm_ext.adain``
(its parameters by name: tvm-ext/src/interface.rs); an AdaIN followed by
anything else becomes the kernel without activation. Operand order of the
multiplies and adds does not matter.

A chain is rewritten only when it is exactly that computation: float32
throughout, ``x`` of rank 3 normalized over its last axis only (``axes=[2]``,
or ``[0, 2]`` with a batch of provably 1, which is the same), ``scale`` and
``shift`` of shape ``[B, C, 1]``, ``w`` and ``b`` of ``[C]``, ``alpha`` of
``[1, C, 1]`` with ``inv`` computed from that same ``alpha``; and every
intermediate is a dataflow variable used only by the next link of the chain
(``y`` twice, by Snake). Anything else is left to TVM. The intermediates left
dead are removed by DeadCodeElimination.
"""

from __future__ import annotations

import numpy as np
import tvm
import tvm_ffi
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.sym import Analyzer

from kokoro_tvm_ext.plugin.kernels import call as kernel_call
from kokoro_tvm_ext.plugin.passes._relax_utils import (
    UseCounter,
    is_f32,
    map_functions,
    same_shape,
    scalar_value,
    shape_of,
)

ADD = tvm.ir.Op.get("relax.add")
DIVIDE = tvm.ir.Op.get("relax.divide")
INSTANCE_NORM = tvm.ir.Op.get("relax.nn.instance_norm")
LEAKY_RELU = tvm.ir.Op.get("relax.nn.leakyrelu")
MULTIPLY = tvm.ir.Op.get("relax.multiply")
POWER = tvm.ir.Op.get("relax.power")
SIN = tvm.ir.Op.get("relax.sin")

ACT_NONE, ACT_SNAKE, ACT_LEAKY_RELU = 0, 1, 2


class _Matcher:
    def __init__(self, uses: UseCounter):
        self.uses = uses
        self.analyzer = Analyzer()

    def link(self, var, op, count: int = 1):
        """The call bound to ``var`` if it is a dataflow variable used ``count`` times and bound to ``op``."""
        if not isinstance(var, relax.DataflowVar) or self.uses.counts.get(var, 0) != count:
            return None
        value = self.uses.values.get(var)
        if isinstance(value, relax.Call) and value.op == op and is_f32(value):
            return value
        return None

    def same_dims(self, expr, dims) -> bool:
        return same_shape(shape_of(expr), dims, self.analyzer)

    def adain(self, y, count: int | None = None):
        """The kernel's arguments if ``y`` is ``scale * instance_norm(x) + shift``.

        ``count``: how often ``y``, an intermediate, must be used; None when ``y``
        ends the chain (any variable, any number of uses).
        """
        if count is None:
            add = self.uses.values.get(y)
            add = add if isinstance(add, relax.Call) and add.op == ADD and is_f32(add) else None
        else:
            add = self.link(y, ADD, count)
        if add is None:
            return None
        for y1, shift in _orders(add.args):
            mul = self.link(y1, MULTIPLY)
            if mul is None:
                continue
            for n, scale in _orders(mul.args):
                norm = self.link(n, INSTANCE_NORM)
                if norm is None:
                    continue
                found = self._norm(norm, y, scale, shift)
                if found is not None:
                    return found
        return None

    def _norm(self, norm, y, scale, shift):
        x, w, b = norm.args
        a = norm.attrs
        dims = shape_of(x)
        if dims is None or len(dims) != 3 or not all(map(is_f32, (x, w, b, scale, shift))):
            return None
        batch, channels, _ = dims
        axes = sorted({int(ax) % 3 for ax in a.axes})
        over_length = axes == [2] or (axes == [0, 2] and self.analyzer.can_prove_equal(batch, 1))
        if int(a.channel_axis) % 3 != 1 or not over_length or bool(a.center) != bool(a.scale):
            return None
        affine = bool(a.scale)
        if not (
            self.same_dims(y, dims)
            and self.same_dims(scale, [batch, channels, 1])
            and self.same_dims(shift, [batch, channels, 1])
            and (not affine or (self.same_dims(w, [channels]) and self.same_dims(b, [channels])))
        ):
            return None
        return {
            "x": x,
            "norm": [w, b] if affine else [],
            "scale": scale,
            "shift": shift,
            "eps": float(a.epsilon),
            "channels": channels,
        }

    def snake(self, z):
        """(kernel arguments, alpha, y) if ``z`` is Snake of an AdaIN output ``y``."""
        add = self.uses.values.get(z)
        if not (isinstance(add, relax.Call) and add.op == ADD and is_f32(add)):
            return None
        for y, m in _orders(add.args):
            mul = self.link(m, MULTIPLY)
            if mul is None:
                continue
            for inv, p in _orders(mul.args):
                power = self.link(p, POWER)
                if power is None or not _is_scalar(power.args[1], 2.0):
                    continue
                s = self.link(power.args[0], SIN)
                t = self.link(s.args[0], MULTIPLY) if s is not None else None
                if t is None:
                    continue
                for alpha, ty in _orders(t.args):
                    if not ty.same_as(y):
                        continue
                    found = self.adain(y, count=2)
                    if found is None or not is_f32(alpha):
                        continue
                    if self.same_dims(alpha, [1, found["channels"], 1]) and self._is_inverse(inv, alpha):
                        return found, alpha, y
        return None

    def _is_inverse(self, inv, alpha) -> bool:
        """Whether ``inv`` is ``1.0 / alpha``, possibly times 1.0 (or already folded)."""
        if isinstance(inv, tvm.ir.GenericConst) and isinstance(alpha, tvm.ir.GenericConst):
            a, i = alpha.value.numpy(), inv.value.numpy()
            return a.shape == i.shape and bool(np.array_equal(np.float32(1.0) / a, i))
        value = self.uses.values.get(inv) if isinstance(inv, relax.Var) else None
        if isinstance(value, relax.Call) and value.op == MULTIPLY:
            for other, one in _orders(value.args):
                if _is_scalar(one, 1.0):
                    return self._is_inverse(other, alpha)
            return False
        if isinstance(value, relax.Call) and value.op == DIVIDE:
            one, divisor = value.args
            return _is_scalar(one, 1.0) and _same_value(divisor, alpha)
        return False

    def leaky_relu(self, z):
        """(kernel arguments, slope, y) if ``z`` is leaky_relu of an AdaIN output ``y``."""
        value = self.uses.values.get(z)
        if not (isinstance(value, relax.Call) and value.op == LEAKY_RELU and is_f32(value)):
            return None
        y = value.args[0]
        found = self.adain(y, count=1)
        return None if found is None else (found, float(value.attrs.alpha), y)


def _orders(args):
    """Both operand orders of a binary op."""
    a, b = args
    return ((a, b), (b, a))


def _is_scalar(expr, value: float) -> bool:
    """Whether ``expr`` is a constant with one element equal to ``value``."""
    return scalar_value(expr) == value


def _same_value(a, b) -> bool:
    if a.same_as(b):
        return True
    return isinstance(a, tvm.ir.GenericConst) and isinstance(b, tvm.ir.GenericConst) and tvm_ffi.structural_equal(a, b)


def _kernel_call(found: dict, act: int, slope: float, alpha, out_ty) -> relax.Call:
    norm = dict(zip(("norm_w", "norm_b"), found["norm"]))
    return kernel_call(
        "adain",
        out_ty,
        act=act,
        has_norm_affine=1 if norm else 0,
        eps=found["eps"],
        slope=slope,
        x=found["x"],
        **norm,
        scale=found["scale"],
        shift=found["shift"],
        alpha=alpha,
    )


def plan_rewrites(func: relax.Function) -> dict:
    """Each chain's last variable mapped to the kernel call that replaces its value."""
    uses = UseCounter.of(func)
    match = _Matcher(uses)
    plan, covered = {}, set()
    for var in uses.order:
        snake = match.snake(var)
        if snake is not None:
            found, alpha, y = snake
            plan[var] = _kernel_call(found, ACT_SNAKE, 0.0, alpha, var.ty)
            covered.add(y)
            continue
        leaky = match.leaky_relu(var)
        if leaky is not None:
            found, slope, y = leaky
            plan[var] = _kernel_call(found, ACT_LEAKY_RELU, slope, None, var.ty)
            covered.add(y)
    # An AdaIN whose output feeds neither: the kernel without activation. Its
    # output may have any number of uses.
    for var in uses.order:
        if var in plan or var in covered:
            continue
        found = match.adain(var)
        if found is not None:
            plan[var] = _kernel_call(found, ACT_NONE, 0.0, None, var.ty)
    return plan


@mutator
class _Rewriter(PyExprMutator):
    def __init__(self, mod, plan: dict):
        super().__init__(mod)
        self.plan = plan

    def visit_var_binding_(self, binding):
        replacement = self.plan.get(binding.var)
        if replacement is not None:
            binding = relax.VarBinding(binding.var, replacement)
        super().visit_var_binding_(binding)


@tvm.transform.module_pass(opt_level=0, name="DispatchAdaIN")
class DispatchAdaIN:
    """AdaIN chains, with Snake or leaky_relu after them, become one fused kernel call (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _rewrite(mod, func))


def _rewrite(mod, func):
    plan = plan_rewrites(func)
    return _Rewriter(mod, plan).visit_expr(func) if plan else None
