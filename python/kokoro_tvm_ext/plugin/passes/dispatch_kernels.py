"""Send the heavy ops to the plugin's Rust kernels.

``relax.nn.conv1d``, ``relax.nn.conv1d_transpose`` and ``relax.matmul``
(with a 2-D right-hand side, i.e. every linear layer) on float32 become
``call_dps_packed`` calls to ``kokoro_tvm_ext.conv1d`` /
``conv1d_transpose`` / ``matmul``, and the frontend's LSTM op
``kokoro_tvm_ext.lstm`` a call of the LSTM kernel. A ``relax.matmul`` of two activations
(ALBERT's attention, ``q @ k^T`` and ``probs @ v``) becomes
``kokoro_tvm_ext.batch_matmul``; a swap of the last two axes feeding it is
read through strides instead of copied. A float32 softmax over the last axis
(attention's rows) becomes ``kokoro_tvm_ext.softmax`` (TVM's ran scalar: 7 ns an
element, a tenth of a long text stage). Stock TVM's CPU pipeline leaves
these unscheduled (single thread, no tiling), and they are ~90% of Kokoro's
time. Anything the kernels do not cover (other layouts or dtypes) is left to TVM.

Which convolutions, linear layers and LSTMs the kernels take, and the calls they become,
is decided in Rust (``kokoro_tvm_ext.legalize.to_kernel``, tvm-ext/src/legalize/),
by the same rules ``kokoro_tvm_ext.enable_kernels()`` puts into stock pipelines;
this pass adds what needs the whole graph: weights seen through the broadcast a
symbolic batch adds, and attention's transposes.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.sym import Analyzer

from kokoro_tvm_ext.plugin.kernels import call as kernel_call
from kokoro_tvm_ext.plugin.legalize.switch import lstm_op, to_kernel
from kokoro_tvm_ext.plugin.passes._relax_utils import in_scope, is_f32, is_one, map_functions, same_shape, shape_of

CONV1D = tvm.ir.Op.get("relax.nn.conv1d")
CONV1D_TRANSPOSE = tvm.ir.Op.get("relax.nn.conv1d_transpose")
MATMUL = tvm.ir.Op.get("relax.matmul")
BROADCAST_TO = tvm.ir.Op.get("relax.broadcast_to")
MULTIPLY = tvm.ir.Op.get("relax.multiply")
PERMUTE_DIMS = tvm.ir.Op.get("relax.permute_dims")
RESHAPE = tvm.ir.Op.get("relax.reshape")
SOFTMAX = tvm.ir.Op.get("relax.nn.softmax")
LSTM = lstm_op()


def rust_rule(call: relax.Call, _lookup, _builder):
    """conv1d / conv1d_transpose / the LSTM: the Rust rule, the one ``enable_kernels()`` uses in stock pipelines."""
    return to_kernel(call)


def matmul_call(call: relax.Call, lookup, builder):
    x, w = call.args
    out_dtype = call.attrs.out_dtype
    if out_dtype is not None and str(out_dtype) not in ("", "float32"):
        return None
    if not (is_f32(x) and is_f32(w)) or len(x.ty.shape) < 2 or len(w.ty.shape) < 2:
        return None
    # With a symbolic batch, torch's bmm decomposition broadcasts the weight to
    # [B, K, N]; the kernel wants the one [K, N] matrix it came from.
    source = lookup(w) if isinstance(w, relax.Var) else None
    weight = source.args[0] if isinstance(source, relax.Call) and source.op == BROADCAST_TO else w
    if not in_scope(weight, w):
        weight = w
    w_shape = list(weight.ty.shape)
    # torch's decomposition turns linear layers into bmm with an expanded
    # [1, K, N] weight; leading 1s are the same 2-D weight for every row.
    if 2 <= len(w_shape) <= len(x.ty.shape) and all(is_one(d) for d in w_shape[:-2]):
        if len(w_shape) > 2:
            weight = builder.normalize(relax.op.reshape(weight, w_shape[-2:]))
        # A linear layer: the Rust rule, as for conv1d.
        return to_kernel(builder.normalize(relax.op.matmul(x, weight, out_dtype=call.attrs.out_dtype)))
    # Two activations (attention): batched, transposes read through strides.
    trans_x, x = _untransposed(x, lookup)
    trans_y, w = _untransposed(w, lookup)
    return kernel_call("batch_matmul", call.ty, trans_x=trans_x, trans_y=trans_y, x=x, y=w)


def softmax_call(call: relax.Call, _lookup, _builder):
    (x,) = call.args
    rank = int(x.ty.ndim) if is_f32(x) else -1  # -1: unknown
    if rank < 1 or int(call.attrs.axis) not in (-1, rank - 1):
        return None
    return kernel_call("softmax", call.ty, x=x)


def _same_dims(a, b) -> bool:
    return same_shape(a, b, Analyzer())


def _untransposed(v, lookup):
    """``(1, s)`` if ``v`` is ``s`` with its last two axes swapped, else ``(0, v)``.

    Looks through what commutes with that swap: broadcasts to the same shape,
    reshapes of the leading (batch) axes only, and products with a scalar
    constant (torch's attention scales q and k^T); those are applied to ``s``
    instead, so the swapped copy becomes dead.
    """
    undo = []  # what to apply to s, outermost first
    e = v
    while isinstance(e, relax.DataflowVar):  # bound in the matmul's own block
        b = lookup(e)
        if not isinstance(b, relax.Call) or not b.args:
            break
        src = b.args[0]
        out_shape, in_shape = shape_of(b), shape_of(src)
        if out_shape is None or in_shape is None:
            break
        if b.op == BROADCAST_TO and _same_dims(in_shape, out_shape):
            e = src
        elif b.op == RESHAPE and _same_last_two(in_shape, out_shape):
            undo.append(("reshape", out_shape[:-2] + [out_shape[-1], out_shape[-2]]))
            e = src
        elif b.op == MULTIPLY and _same_dims(in_shape, out_shape) and _is_scalar_constant(b.args[1]):
            undo.append(("multiply", b.args[1]))
            e = src
        elif b.op == PERMUTE_DIMS and b.attrs.axes is not None:
            r = len(in_shape)
            axes = [int(a) for a in b.attrs.axes]
            if r < 2 or axes != list(range(r - 2)) + [r - 1, r - 2]:
                break
            s = src
            for kind, arg in reversed(undo):
                s = relax.op.multiply(s, arg) if kind == "multiply" else relax.op.reshape(s, arg)
            return 1, s
        else:
            break
    return 0, v


def _same_last_two(a, b) -> bool:
    return min(len(a), len(b)) >= 2 and _same_dims(a[-2:], b[-2:])


def _is_scalar_constant(expr) -> bool:
    dims = shape_of(expr)
    if not (isinstance(expr, tvm.ir.GenericConst) and is_f32(expr)) or dims is None:
        return False
    return all(is_one(d) for d in dims)


# Each rewrite takes (call, lookup_binding, block_builder) and returns the replacement, or None to keep the call.
REWRITES = {
    CONV1D: rust_rule,
    CONV1D_TRANSPOSE: rust_rule,
    MATMUL: matmul_call,
    LSTM: rust_rule,
    SOFTMAX: softmax_call,
}


@mutator
class _Dispatcher(PyExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        rewrite = REWRITES.get(call.op)
        if rewrite is None:
            return call
        replacement = rewrite(call, self.lookup_binding, self.builder_)
        return call if replacement is None else replacement


@tvm.transform.module_pass(opt_level=0, name="DispatchToPluginKernels")
class DispatchToPluginKernels:
    """conv1d, conv1d_transpose, float32 matmuls, the LSTM and last-axis softmax become plugin kernel calls
    (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _Dispatcher(mod).visit_expr(func))
