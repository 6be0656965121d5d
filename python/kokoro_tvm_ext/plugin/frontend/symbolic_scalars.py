"""Python arithmetic on symbolic sizes: ``sym_float``, ``truediv``, ``trunc``, ``floor``,
``ceil``, ``sym_max``, ``sym_min``.

torch.export records size arithmetic done in Python as graph nodes whose targets
are plain Python functions, not ATen ops. ``F.interpolate(x, scale_factor=1.5)``
on a dynamic length, or ``torch.arange(math.trunc(x.shape[1] / 2))``, give::

    sym_float = torch.sym_float(sym_size_int)     # ToFloat(s53)
    mul = operator.mul(sym_float, 1.5)           # (TVM handles this one)
    trunc = math.trunc(mul)                      # TruncToInt(1.5*ToFloat(s53))
    truediv = operator.truediv(sym_size_int, 2)  # IntTrueDiv(s53, 2)

TVM's importer keys nodes by ``target.__name__`` and has no entry for
``sym_float``, ``truediv``, ``trunc``, ``floor``, ``ceil``, ``sym_max`` or
``sym_min``: "AssertionError: Unsupported function types ['sym_float',
'truediv', 'trunc']". (``trunc.default``, ``floor.default``, ... are the
elementwise ATen ops, a different key.)

We compute them as TIR expressions over the input size variables, with
Python's semantics: a SymFloat is a float64 PrimExpr, ``truediv`` divides in
float64, and ``trunc`` is a float-to-int cast (which rounds toward zero).
VMShapeLower evaluates these expressions at run time like any other shape.
Each result is also remembered under torch's sympy expression (symbolic.py),
so output shapes that mention it map to the same PrimExpr.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from kokoro_tvm_ext.plugin.frontend.registry import converter
from kokoro_tvm_ext.plugin.frontend.symbolic import as_float64, is_float, remember


def _scalar(value):
    """A converted argument as a PrimExpr (Python numbers become immediates)."""
    if isinstance(value, bool):
        return tirx.IntImm("bool", int(value))
    if isinstance(value, int):
        return tirx.IntImm("int64", value)
    if isinstance(value, float):
        return tirx.FloatImm("float64", value)
    if not tvm.ir.is_prim_expr(value):
        raise TypeError(f"expected a symbolic scalar, got {value!r}")
    return value


def _args(node, importer):
    return [_scalar(a) for a in importer.retrieve_args(node)]


def _to_int(fn):
    """``fn`` (floor, ceil or identity) applied to a float, then cast to int64;
    an int argument is returned unchanged (math.trunc(7) == 7)."""

    def convert(node, importer):
        (x,) = _args(node, importer)
        if not is_float(x):
            return remember(importer, node.meta.get("val"), x)
        return remember(importer, node.meta.get("val"), tirx.Cast("int64", fn(x)))

    return convert


@converter("sym_float")
def sym_float(node, importer):
    (x,) = _args(node, importer)
    return remember(importer, node.meta.get("val"), as_float64(x))


@converter("truediv")
def truediv(node, importer):
    a, b = _args(node, importer)
    return remember(importer, node.meta.get("val"), as_float64(a) / as_float64(b))


trunc = converter("trunc")(_to_int(lambda x: x))  # the cast itself truncates toward zero
floor = converter("floor")(_to_int(tirx.floor))
ceil = converter("ceil")(_to_int(tirx.ceil))


def _min_max(fn):
    def convert(node, importer):
        a, b = _args(node, importer)
        if is_float(a) or is_float(b):
            a, b = as_float64(a), as_float64(b)
        return remember(importer, node.meta.get("val"), fn(a, b))

    return convert


sym_max = converter("sym_max")(_min_max(tirx.max))
sym_min = converter("sym_min")(_min_max(tirx.min))


__all__ = ["ceil", "floor", "sym_float", "sym_max", "sym_min", "truediv", "trunc"]
