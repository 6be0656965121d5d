"""Send the heavy ops to the plugin's Rust kernels.

``relax.nn.conv1d``, ``relax.nn.conv1d_transpose`` and ``relax.matmul``
(with a 2-D right-hand side, i.e. every linear layer) on float32 become
``call_dps_packed`` calls to ``kokoro_tvm_ext.conv1d`` /
``conv1d_transpose`` / ``matmul``. Stock TVM's CPU pipeline leaves these
unscheduled (single thread, no tiling), and they are ~90% of Kokoro's time.
Anything the kernels do not cover (other layouts or dtypes) is left to TVM.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

CONV1D = tvm.ir.Op.get("relax.nn.conv1d")
CONV1D_TRANSPOSE = tvm.ir.Op.get("relax.nn.conv1d_transpose")
MATMUL = tvm.ir.Op.get("relax.matmul")
BROADCAST_TO = tvm.ir.Op.get("relax.broadcast_to")


def _is_f32(expr) -> bool:
    ty = expr.ty
    return isinstance(ty, relax.TensorType) and str(ty.dtype) == "float32"


def _ints(values) -> list[int]:
    return [int(v) for v in values]


def _packed(name: str, prims: list[int], tensors: list, out_ty) -> relax.Call:
    args = [relax.prim_value(int(p)) for p in prims] + list(tensors)
    return relax.op.call_dps_packed(f"kokoro_tvm_ext.{name}", relax.Tuple(args), out_ty=out_ty)


def _kernel_can_take(call: relax.Call, kernel_layout: str) -> bool:
    """float32 in and out, in the layouts torch uses (the kernels' layouts)."""
    a = call.attrs
    return (
        (a.data_layout, a.kernel_layout, a.out_layout) == ("NCW", kernel_layout, "NCW")
        and str(a.out_dtype) in ("", "float32")
        and all(_is_f32(x) for x in call.args)
    )


def conv1d_call(call: relax.Call, _lookup):
    if not _kernel_can_take(call, "OIW"):
        return None
    a = call.attrs
    (stride,), (left, right), (dilation,) = _ints(a.strides), _ints(a.padding), _ints(a.dilation)
    return _packed("conv1d", [stride, left, right, dilation, int(a.groups), 0], call.args, call.ty)


def conv1d_transpose_call(call: relax.Call, _lookup):
    if not _kernel_can_take(call, "IOW"):
        return None
    a = call.attrs
    (stride,), (left, right), (out_pad,), (dilation,) = (
        _ints(a.strides), _ints(a.padding), _ints(a.output_padding), _ints(a.dilation)
    )
    prims = [stride, left, right, out_pad, dilation, int(a.groups), 0]
    return _packed("conv1d_transpose", prims, call.args, call.ty)


def matmul_call(call: relax.Call, lookup):
    x, w = call.args
    # With a symbolic batch, torch's bmm decomposition broadcasts the weight to
    # [B, K, N]; the kernel wants the one [K, N] matrix it came from.
    source = lookup(w) if isinstance(w, relax.Var) else None
    if isinstance(source, relax.Call) and source.op == BROADCAST_TO:
        w = source.args[0]
    if not (_is_f32(x) and _is_f32(w)) or str(call.attrs.out_dtype) not in ("", "float32"):
        return None
    w_shape = list(w.ty.shape)
    if len(x.ty.shape) < 2 or len(w_shape) < 2 or len(w_shape) > len(x.ty.shape):
        return None
    # torch's decomposition turns linear layers into bmm with an expanded
    # [1, K, N] weight; leading 1s are the same 2-D weight for every row.
    if any(not isinstance(d, tvm.tirx.IntImm) or int(d) != 1 for d in w_shape[:-2]):
        return None
    if len(w_shape) > 2:
        w = relax.op.reshape(w, w_shape[-2:])
    return _packed("matmul", [0], [x, w], call.ty)


# Each rewrite takes (call, lookup_binding) and returns the replacement, or None to keep the call.
REWRITES = {CONV1D: conv1d_call, CONV1D_TRANSPOSE: conv1d_transpose_call, MATMUL: matmul_call}


@mutator
class _Dispatcher(PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        rewrite = REWRITES.get(call.op)
        if rewrite is None:
            return call
        replacement = rewrite(call, self.lookup_binding)
        return call if replacement is None else replacement


@tvm.transform.module_pass(opt_level=0, name="DispatchToPluginKernels")
def DispatchToPluginKernels(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
    updates = {}
    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            updates[gv] = _Dispatcher(mod).visit_expr(func)
    for gv, func in updates.items():
        mod[gv] = func
    return mod
