"""Parameters whose shapes name a size variable only through an expression.

torch.export allows derived input dimensions (``dynamic_shapes={1: 2 * T}``),
and TVM's importer types the parameter as ``R.Tensor((1, 2 * T))``. If no
parameter has ``T`` itself as a dimension, VMShapeLower cannot recover ``T``
from the run-time shape and the build fails: "InternalError: Check failed:
(!require_value_computed) is false: PrimExpr T.int64(2) * s47 is not computed".

For each such variable we solve one dimension that is linear in it, ``a * T + b``
(a > 0; torch only allows linear derived dims): the parameter gets a fresh
dimension ``n``, and the function starts with

    v = R.shape([(n - b) // a])
    _ = R.match_cast(v, R.Shape([T]))                          # defines T
    x = R.match_cast(x_in, R.Tensor((1, 2 * T)))               # checks n == a*T + b

binding the old parameter variable, so the body is unchanged. A shape that does
not satisfy the relation fails that check at run time, as any shape mismatch
does. Functions whose variables are all defined are returned as they are, and
expressions that are not linear in a single unknown are left alone (the build
then reports VMShapeLower's error as before).
"""

from __future__ import annotations

import tvm
from tvm import relax, sym, tirx


def _tensor_dims(param):
    ty = param.ty
    if isinstance(ty, relax.TensorType) and ty.shape is not None:
        return list(ty.shape)
    return []


def _is_var(expr) -> bool:
    return isinstance(expr, tirx.Var)


def _free_vars(expr) -> list:
    return list(tirx.analysis.undefined_vars(expr, []))


def _solve(dims_by_param, defined: set):
    """{var: (param index, dim index, coefficient, base)} for the unknowns we can solve."""
    solved: dict = {}
    progress = True
    while progress:
        progress = False
        for p, dims in enumerate(dims_by_param):
            for d, expr in enumerate(dims):
                unknown = [v for v in _free_vars(expr) if v not in defined and v not in solved]
                if len(unknown) != 1:
                    continue
                linear = sym.detect_linear_equation(expr, unknown)
                if len(linear) != 2 or not isinstance(linear[0], tirx.IntImm) or linear[0].value < 1:
                    continue
                if any(v not in defined and v not in solved for v in _free_vars(linear[1])):
                    continue
                solved[unknown[0]] = (p, d, linear[0], linear[1])
                progress = True
    return solved


def _bounds(func) -> tuple[dict, dict]:
    attrs = func.attrs or {}
    lower = dict(attrs["tir_var_lower_bound"]) if "tir_var_lower_bound" in attrs else {}
    upper = dict(attrs["tir_var_upper_bound"]) if "tir_var_upper_bound" in attrs else {}
    return lower, upper


def _with_bounds(func, new_dims: dict):
    """Add lower/upper bounds for the new dimension variables where the old ones had them."""
    lower, upper = _bounds(func)
    if not lower and not upper:
        return func
    for var, expr in new_dims.items():
        names = [v.name for v in _free_vars(expr)]
        if all(n in lower for n in names):
            analyzer = sym.Analyzer()
            for v in _free_vars(expr):
                hi = upper.get(v.name)
                lo = int(lower[v.name])
                hi = int(hi) if hi is not None else 1 << 61
                analyzer.bind(v, tvm.ir.Range(lo, hi + 1))
            bound = analyzer.const_int_bound(expr)
            lower[var.name] = bound.min_value
            if all(n in upper for n in names):
                upper[var.name] = bound.max_value
    if lower:
        func = func.with_attr("tir_var_lower_bound", lower)
    if upper:
        func = func.with_attr("tir_var_upper_bound", upper)
    return func


def bind_derived_dims(func: relax.Function) -> relax.Function:
    """``func`` with every parameter-shape variable defined before use (see module doc)."""
    dims_by_param = [_tensor_dims(p) for p in func.params]
    defined = {e for dims in dims_by_param for e in dims if _is_var(e)}
    if all(not [v for v in _free_vars(e) if v not in defined] for dims in dims_by_param for e in dims):
        return func
    solved = _solve(dims_by_param, defined)
    if not solved:
        return func

    # Every dimension that mentions a solved variable becomes a fresh variable.
    params = list(func.params)
    fresh: dict = {}  # (param, dim) -> new var
    new_dims: dict = {}  # new var -> the expression it stands for
    for p, dims in enumerate(dims_by_param):
        new_shape = list(dims)
        for d, expr in enumerate(dims):
            if any(v in solved for v in _free_vars(expr)):
                var = tirx.Var(f"{func.params[p].name}_dim{d}", "int64")
                fresh[(p, d)] = new_shape[d] = var
                new_dims[var] = expr
        if new_shape != dims:
            old = func.params[p]
            params[p] = relax.Var(old.name, relax.TensorType(new_shape, old.ty.dtype))

    bindings = []
    for var, (p, d, coeff, base) in solved.items():  # in solving order: later ones may use earlier
        # VMShapeLower computes an expression only where a type mentions it, so the
        # shape value gets its own typed binding before the match_cast reads it.
        value = [tirx.floordiv(fresh[(p, d)] - base, coeff)]
        computed = relax.Var(f"{var.name}_value", relax.ShapeType(value))
        bindings.append(relax.VarBinding(computed, relax.ShapeExpr(value)))
        bindings.append(
            relax.MatchCast(relax.Var(f"{var.name}_shape", relax.ShapeType([var])), computed, relax.ShapeType([var]))
        )
    for old, new in zip(func.params, params):
        if not old.same_as(new):
            bindings.append(relax.MatchCast(old, new, old.ty))

    body = relax.SeqExpr([relax.BindingBlock(bindings), *func.body.blocks], func.body.body)
    out = relax.Function(params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    return _with_bounds(out, new_dims)


@tvm.transform.module_pass(opt_level=0, name="BindDerivedInputDims")
class BindDerivedInputDims:
    """Apply :func:`bind_derived_dims` to every Relax function; the module itself when none changes."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        updates = {}
        for gv, func in mod.functions_items():
            if isinstance(func, relax.Function):
                new = bind_derived_dims(func)
                if not new.same_as(func):
                    updates[gv] = new
        if not updates:
            return mod
        mod = mod.clone()
        for gv, func in updates.items():
            mod[gv] = func
        return relax.transform.Normalize()(mod)  # types the new SeqExprs


__all__ = ["BindDerivedInputDims", "bind_derived_dims"]
