"""Put several imported IRModules into one, without symbol clashes.

Every ``from_exported_program`` result names its entry ``main`` (and helper
PrimFuncs may share names across modules). To build one library we rename each
module's globals with a prefix, ``main`` becoming the prefix itself, and rewrite
the references inside its functions.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator


@mutator
class _GlobalRenamer(PyExprMutator):
    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = mapping

    def visit_global_var_(self, op):
        return self.mapping.get(op, op)


def _renamed(name: str, prefix: str) -> str:
    return prefix if name == "main" else f"{prefix}__{name}"


def merge_modules(modules: dict[str, tvm.IRModule]) -> tvm.IRModule:
    """``{"text_stage": mod1, ...}`` → one IRModule with ``text_stage`` etc. as entries."""
    bb = relax.BlockBuilder()
    taken: set[str] = set()
    for prefix, mod in modules.items():
        mapping: dict = {}
        # PrimFuncs first: the Relax functions refer to them.
        ordered = sorted(mod.functions_items(), key=lambda item: isinstance(item[1], relax.Function))
        for old, func in ordered:
            name = _renamed(old.name_hint, prefix)
            if name in taken:
                raise ValueError(f"merge_modules: two functions named {name}")
            taken.add(name)
            if isinstance(func, relax.Function):
                func = _GlobalRenamer(mapping).visit_expr(func)
            if func.attrs is not None and "global_symbol" in func.attrs:
                func = func.with_attr("global_symbol", name)
            mapping[old] = bb.add_func(func, name)
    return bb.get()
