"""LiftWeights: a Relax function's large constants become its trailing parameters.

TVM puts a module's constants inside the library it exports, and loading that
library copies them out of it through a deserialized blob: Kokoro's ~380 MB of
weights were in memory three times while the VM loaded (1.54 GB peak, 0.8 s),
and twice after. Lifted, they go to a file of their own (``runtime/weights.py``)
that the runtime maps read-only and passes to every call: in memory once,
loaded in milliseconds, shared between processes through the page cache.

Runs last, on the fully lowered functions, so no optimisation sees a parameter
where it saw a constant. Constants under ``min_bytes`` (scalars, small tables)
stay in the library. A constant used several times becomes one parameter.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from kokoro_tvm_ext.plugin.passes._relax_utils import map_functions

MIN_BYTES = 4096


def _nbytes(tensor) -> int:
    count = 1
    for dim in tensor.shape:
        count *= int(dim)
    dtype = tvm.runtime.DataType(str(tensor.dtype))
    return count * dtype.bits * dtype.lanes // 8


@mutator
class _Lifter(PyExprMutator):
    def __init__(self, min_bytes: int):
        super().__init__()
        self.min_bytes = min_bytes
        self.params: list[relax.Var] = []
        self.values: list = []
        self._seen: dict = {}

    def visit_generic_const_(self, const: tvm.ir.GenericConst):
        tensor = const.value
        if not isinstance(tensor, tvm.runtime.Tensor) or _nbytes(tensor) < self.min_bytes:
            return const
        if const not in self._seen:  # TVM objects hash and compare by identity
            ty = relax.TensorType([int(d) for d in tensor.shape], str(tensor.dtype))
            var = relax.Var(f"weight{len(self.params)}", ty)
            self._seen[const] = var
            self.params.append(var)
            self.values.append(tensor)
        return self._seen[const]


@tvm.transform.module_pass(opt_level=0, name="LiftWeights")
class LiftWeights:
    """The pass. ``sink[function name]`` receives the lifted values (``tvm.runtime.Tensor``),
    in the order of the parameters appended to that function; constants under ``min_bytes`` stay."""

    def __init__(self, sink: dict, min_bytes: int = MIN_BYTES):
        self.sink = sink
        self.min_bytes = min_bytes

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, self._lift)

    def _lift(self, gvar, func: relax.Function):
        lifter = _Lifter(self.min_bytes)
        body = lifter.visit_expr(func.body)
        self.sink[gvar.name_hint] = lifter.values
        if not lifter.params:
            return None
        return relax.Function(list(func.params) + lifter.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
