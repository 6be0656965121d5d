"""Turn ``x ** 2`` and ``x ** 3`` with a constant exponent into multiplies.

ALBERT's GELU is ``0.5 * x * (1 + tanh(c * (x + 0.044715 * x ** 3)))``. TVM
lowers ``power`` to a scalar ``powf`` call per element, which also keeps LLVM
from vectorizing the fused loop around it: the GELU of one layer took 11.6 ms
at 311 tokens, and 0.36 ms once the cube is ``x * x * x`` (with TVM's fast
tanh, see pipeline.py). Other exponents are left to ``powf``.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from kokoro_tvm_ext.plugin.passes._relax_utils import map_functions, scalar_value

POWER = tvm.ir.Op.get("relax.power")
SMALL_EXPONENTS = (2, 3)


def constant_exponent(expr) -> int | None:
    """The exponent if ``expr`` is a one-element constant equal to 2 or 3."""
    value = scalar_value(expr)
    return int(value) if value in SMALL_EXPONENTS else None


def _expandable(call) -> int | None:
    """The exponent if ``call`` is a float ``power`` by 2 or 3 that keeps its base's type."""
    if not (isinstance(call, relax.Call) and call.op == POWER and len(call.args) == 2):
        return None
    base_ty, out_ty = call.args[0].ty, call.ty
    if not (isinstance(base_ty, relax.TensorType) and isinstance(out_ty, relax.TensorType)):
        return None
    # No broadcast against the exponent and no type promotion to reproduce.
    dtype = str(out_ty.dtype)
    if str(base_ty.dtype) != dtype or not dtype.startswith(("float", "bfloat")) or base_ty.ndim != out_ty.ndim:
        return None
    return constant_exponent(call.args[1])


@mutator
class _Expander(PyExprMutator):
    def visit_var_binding_(self, binding):
        value = self.visit_expr(binding.value)
        n = _expandable(value)
        if n is None:
            super().visit_var_binding_(binding)
            return
        base = value.args[0]
        product = relax.op.multiply(base, base)
        if n == 3:
            product = relax.op.multiply(self.builder_.emit(product), base)
        # The binding keeps its var, so outputs of the block stay outputs.
        super().visit_var_binding_(relax.VarBinding(binding.var, product))


@tvm.transform.module_pass(opt_level=0, name="ExpandSmallPowers")
class ExpandSmallPowers:
    """``x ** 2`` and ``x ** 3`` by a constant become multiplies (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _Expander(mod).visit_expr(func))
