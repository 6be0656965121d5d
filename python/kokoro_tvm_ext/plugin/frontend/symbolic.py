"""torch symbolic sizes (SymInt / sympy) as TIR expressions over the importer's shape vars.

torch.export records every intermediate shape as a sympy expression in the
input size symbols (``s0``, ``s53``, ...), already simplified with the export's
range constraints. TVM's importer turns the symbols of input shapes into
``tirx.Var``s but does not keep that map. ``to_prim`` rebuilds it from the
placeholders (each input dimension that is a bare symbol names one var; a
derived one like ``2*s47`` names the vars inside it) and
translates an expression, so converters can state output shapes exactly
instead of letting Relax infer (and sometimes lose) them.

Sizes computed in the graph itself (``sym_float``, ``truediv``, ``trunc``, ...
in symbolic_scalars.py) are remembered under their sympy expression, so a shape
that torch records as ``TruncToInt(1.5*ToFloat(s53))`` maps to the very
PrimExpr the graph computed. Float sizes are float64 PrimExprs, as in Python.
"""

from __future__ import annotations

import weakref

import tvm
from tvm import tirx

_SYMBOLS: weakref.WeakKeyDictionary[object, dict[str, tirx.PrimExpr]] = weakref.WeakKeyDictionary()


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
                elif expr is not None and not expr.is_number:
                    # A derived dimension (``2*s47``): TVM named its variables after torch's symbols.
                    names = {str(s) for s in expr.free_symbols}
                    for var in tirx.analysis.undefined_vars(relax_dim, []):
                        if var.name in names:
                            table.setdefault(var.name, var)
        _SYMBOLS[importer] = table
    return table


def remember(importer, value, prim: tirx.PrimExpr) -> tirx.PrimExpr:
    """Record that the SymInt/SymFloat ``value`` is computed as ``prim``; returns ``prim``."""
    expr = getattr(getattr(value, "node", None), "expr", None)
    if expr is not None and not expr.is_number:
        _symbol_table(importer).setdefault(str(expr), prim)
    return prim


def is_float(e: tirx.PrimExpr) -> bool:
    return str(e.ty).startswith(("float", "bfloat"))


def as_float64(value) -> tirx.PrimExpr:
    """A Python number or PrimExpr as a float64 PrimExpr (Python's float)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return tirx.FloatImm("float64", float(value))
    if isinstance(value, (tirx.IntImm, tirx.FloatImm)):
        return tirx.FloatImm("float64", float(value.value))
    return value if str(value.ty) == "float64" else tirx.Cast("float64", value)


def sympy_to_prim(importer, expr) -> tirx.PrimExpr:
    """A sympy size expression as an int64 (or, for a float, float64) PrimExpr.

    Raises on what it cannot map.
    """
    import sympy
    from torch.utils._sympy import functions as tfn

    def arith(fn, args):
        args = [conv(a) for a in args]
        if any(is_float(a) for a in args):
            args = [as_float64(a) for a in args]
        return _fold(fn, args)

    def conv(e):
        if isinstance(e, (int, sympy.Integer)):
            return tirx.IntImm("int64", int(e))
        if isinstance(e, (float, sympy.Float, sympy.Rational)):
            return tirx.FloatImm("float64", float(e))
        table = _symbol_table(importer)
        if str(e) in table:  # an input dimension, or a size the graph computed
            return table[str(e)]
        if isinstance(e, sympy.Symbol):
            raise KeyError(f"no input dimension defines the symbol {e}")
        if isinstance(e, sympy.Add):
            return arith(lambda a, b: a + b, e.args)
        if isinstance(e, sympy.Mul):
            return arith(lambda a, b: a * b, e.args)
        if isinstance(e, tfn.ToFloat):
            return as_float64(conv(e.args[0]))
        if isinstance(e, (tfn.IntTrueDiv, tfn.FloatTrueDiv)):
            return as_float64(conv(e.args[0])) / as_float64(conv(e.args[1]))
        if isinstance(e, tfn.TruncToInt):  # a float to int cast truncates, like math.trunc
            return tirx.Cast("int64", conv(e.args[0]))
        if isinstance(e, tfn.FloorToInt):
            return tirx.Cast("int64", tirx.floor(conv(e.args[0])))
        if isinstance(e, tfn.CeilToInt):
            return tirx.Cast("int64", tirx.ceil(conv(e.args[0])))
        if (
            isinstance(e, (sympy.Pow, tfn.PowByNatural))
            and isinstance(e.args[1], sympy.Integer)
            and int(e.args[1]) >= 1
        ):
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
    """An int, float, SymInt, SymFloat, fx.Node (a size computed in the graph) or
    PrimExpr as a PrimExpr."""
    import torch

    if isinstance(value, bool):
        raise TypeError("a bool is not a size")
    if isinstance(value, int):
        return tirx.IntImm("int64", value)
    if isinstance(value, float):
        return tirx.FloatImm("float64", value)
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        node = value.node
        if node.is_constant() if hasattr(node, "is_constant") else False:
            return to_prim(importer, node.pytype(value))
        return sympy_to_prim(importer, node.expr)
    if hasattr(value, "op") and value in importer.env:  # an fx.Node
        value = importer.env[value]
    if tvm.ir.is_prim_expr(value):
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
