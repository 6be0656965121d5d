"""``precision="bf16"``: the plugin's conv1d / conv1d_transpose / matmul calls
with constant weights become their bf16 variants, with the weights packed to
bf16 once, here, at compile time (``kokoro_tvm_ext.pack_bf16``; the layout is
the Rust side's business, see tvm-ext/src/bf16.rs).

Runs after FoldConstant, so weights computed from constants (weight norm)
are constants by then, and after PackWeightsWinograd, whose calls stay f32
(faster here, see pack_winograd.py). Calls it does not cover stay f32:

- grouped convolutions (depthwise ones run a direct loop, not a GEMM) and
  weights that are not constants;
- calls upstream of a cumulative sum: an error there is integrated, and grows
  with the input's length. In Kokoro that is the F0 predictor, whose output
  SineGen integrates into the phase of its sines: with bf16 F0 the waveform
  drifts out of phase within a second (SNR against fp32 under 10 dB), while
  the decoder after it takes bf16 at ~40 dB;
- every call in a function whose attribute ``kokoro_tvm_ext.precision`` is
  ``"fp32"`` (compile_kokoro keeps the text stage, which rounds durations to
  whole frames, in f32).
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

CALL_DPS_PACKED = tvm.ir.Op.get("relax.call_dps_packed")
CUMSUM = tvm.ir.Op.get("relax.cumsum")
PRECISION_ATTR = "kokoro_tvm_ext.precision"
PRECISIONS = ("fp32", "bf16")

# f32 kernel -> (pack kind, index of w among the arguments, index of groups).
_KERNELS = {
    "kokoro_tvm_ext.conv1d": ("conv1d", 7, 4),
    "kokoro_tvm_ext.conv1d_transpose": ("conv1d_transpose", 8, 5),
    "kokoro_tvm_ext.matmul": ("matmul", 2, None),
}


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def _int(prim) -> int:
    return int(prim.value)


def upstream_of_cumsum(func: relax.Function) -> dict:
    """The bound values (by hash) that a cumsum of ``func`` depends on."""
    bound = {}
    for block in getattr(func.body, "blocks", []):
        for binding in block.bindings:
            bound[binding.var] = binding.value
    todo = [v for value in bound.values() if isinstance(value, relax.Call) and value.op == CUMSUM
            for v in relax.analysis.free_vars(value)]
    seen = set()
    while todo:
        var = todo.pop()
        if var in seen or var not in bound:
            continue
        seen.add(var)
        todo.extend(relax.analysis.free_vars(bound[var]))
    return {hash(bound[v]): bound[v] for v in seen}


def bound_constant(mutator: PyExprMutator, expr):
    """The constant ``expr`` is bound to, through any variables, else None."""
    while isinstance(expr, relax.Var):
        expr = mutator.lookup_binding(expr)
    return expr if isinstance(expr, tvm.ir.Constant) else None


def is_among(calls: dict, call) -> bool:
    """Whether ``call`` is one of ``calls`` (as made by upstream_of_cumsum)."""
    found = calls.get(hash(call))
    return found is not None and found.same_as(call)


@mutator
class _ToBF16(PyExprMutator):
    def __init__(self, mod, keep_f32: dict):
        super().__init__(mod)
        self.pack = tvm.get_global_func("kokoro_tvm_ext.pack_bf16")
        self.keep_f32 = keep_f32

    def visit_call_(self, call):
        keep = is_among(self.keep_f32, call)
        call = super().visit_call_(call)
        if keep:
            return call
        if call.op != CALL_DPS_PACKED or not isinstance(call.args[0], relax.ExternFunc):
            return call
        name = call.args[0].global_symbol
        if name not in _KERNELS or not isinstance(call.args[1], relax.Tuple):
            return call
        kind, w_index, groups_index = _KERNELS[name]
        args = list(call.args[1].fields)
        groups = 1 if groups_index is None else _int(args[groups_index])
        w = bound_constant(self, args[w_index])
        if w is None or groups != 1 or str(w.value.dtype) != "float32":
            return call
        packed = relax.const(self.pack(kind, groups, w.value))
        if kind == "matmul":
            prims, tensors = args[:1], [args[1], packed, *args[3:]]
        else:
            # The bf16 convolutions take the kernel size as one more prim.
            kernel_size = relax.prim_value(int(w.value.shape[-1]))
            prims, tensors = [*args[:w_index - 1], kernel_size], [args[w_index - 1], packed, *args[w_index + 1:]]
        return relax.op.call_dps_packed(f"{name}_bf16", relax.Tuple(prims + tensors), out_ty=call.ty)


@tvm.transform.module_pass(opt_level=0, name="PackWeightsBF16")
def PackWeightsBF16(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    updates = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        if func.attrs is not None and str(func.attrs.get(PRECISION_ATTR, "bf16")) == "fp32":
            continue
        updates[gv] = _ToBF16(mod, upstream_of_cumsum(func)).visit_expr(func)
    for gv, func in updates.items():
        mod[gv] = func
    return mod
