"""torch symbolic sizes (SymInt / sympy) as TIR expressions over the importer's shape vars.

torch.export records every intermediate shape as a sympy expression in the
input size symbols (``s0``, ``s53``, ...), already simplified with the export's
range constraints. TVM's importer turns the symbols of input shapes into
``tirx.Var``s but does not keep that map. ``to_prim`` rebuilds it from the
placeholders (each input dimension that is a bare symbol names one var) and
translates an expression, so converters can state output shapes exactly
instead of letting Relax infer (and sometimes lose) them.
"""
from __future__ import annotations

import weakref

from tvm import tirx

_SYMBOLS: "weakref.WeakKeyDictionary[object, dict[str, tirx.PrimExpr]]" = weakref.WeakKeyDictionary()


def _symbol_table(importer) -> dict[str, tirx.PrimExpr]:
    table = _SYMBOLS.get(importer)
    if table is None:
        import sympy

        table = {}
        for node, value in list(importer.env.items()):
            if getattr(node, "op", None) != "placeholder":
                continue
            val = node.meta.get("val")
            shape = getattr(getattr(value, "ty", None), "shape", None)
            if val is None or shape is None or not hasattr(val, "shape"):
                continue
            for torch_dim, relax_dim in zip(val.shape, shape):
                expr = getattr(getattr(torch_dim, "node", None), "expr", None)
                if isinstance(expr, sympy.Symbol):
                    table.setdefault(str(expr), relax_dim)
        _SYMBOLS[importer] = table
    return table


def sympy_to_prim(importer, expr) -> tirx.PrimExpr:
    """A sympy integer expression as an int64 PrimExpr; raises on what it cannot map."""
    import sympy
    from torch.utils._sympy import functions as tfn

    def conv(e):
        if isinstance(e, (int, sympy.Integer)):
            return tirx.IntImm("int64", int(e))
        if isinstance(e, sympy.Symbol):
            table = _symbol_table(importer)
            if str(e) not in table:
                raise KeyError(f"no input dimension defines the symbol {e}")
            return table[str(e)]
        if isinstance(e, sympy.Add):
            out = conv(e.args[0])
            for a in e.args[1:]:
                out = out + conv(a)
            return out
        if isinstance(e, sympy.Mul):
            out = conv(e.args[0])
            for a in e.args[1:]:
                out = out * conv(a)
            return out
        if isinstance(e, (sympy.Pow, tfn.PowByNatural)) and isinstance(e.args[1], sympy.Integer) \
                and int(e.args[1]) >= 1:
            base = conv(e.args[0])
            out = base
            for _ in range(int(e.args[1]) - 1):
                out = out * base
            return out
        if isinstance(e, (tfn.FloorDiv, tfn.CleanDiv)):
            return tirx.floordiv(conv(e.args[0]), conv(e.args[1]))
        if isinstance(e, tfn.CeilDiv):
            a, b = (conv(x) for x in e.args)
            return tirx.floordiv(a + b - 1, b)
        if isinstance(e, (tfn.Mod, tfn.PythonMod)):
            return tirx.floormod(conv(e.args[0]), conv(e.args[1]))
        if isinstance(e, (sympy.Max, tfn.Max)):
            return _fold(tirx.max, [conv(a) for a in e.args])
        if isinstance(e, (sympy.Min, tfn.Min)):
            return _fold(tirx.min, [conv(a) for a in e.args])
        raise NotImplementedError(f"cannot translate symbolic size {e!r} ({type(e).__name__})")

    return conv(expr)


def _fold(fn, args):
    out = args[0]
    for a in args[1:]:
        out = fn(out, a)
    return out


def to_prim(importer, value) -> tirx.PrimExpr:
    """An int, SymInt, fx.Node (a size computed in the graph) or PrimExpr as a PrimExpr."""
    import torch

    if isinstance(value, bool):
        raise TypeError("a bool is not a size")
    if isinstance(value, int):
        return tirx.IntImm("int64", value)
    if isinstance(value, torch.SymInt):
        node = value.node
        if node.is_constant() if hasattr(node, "is_constant") else False:
            return tirx.IntImm("int64", int(value))
        return sympy_to_prim(importer, node.expr)
    if hasattr(value, "op") and value in importer.env:  # an fx.Node
        value = importer.env[value]
    if isinstance(value, tirx.PrimExpr):
        return value
    raise TypeError(f"cannot use {value!r} as a size")


def has_min_max(value) -> bool:
    """Whether a SymInt's expression clamps (contains Min / Max)."""
    import sympy
    import torch
    from torch.utils._sympy import functions as tfn

    if not isinstance(value, torch.SymInt):
        return False
    expr = value.node.expr
    return bool(expr.atoms(sympy.Min, sympy.Max, tfn.Min, tfn.Max))
