"""impl="tir": the LSTM as Relax ops plus a TIR PrimFunc with a serial time loop.

For builds that must run without the plugin library, and the legalization of
the ``kokoro_tvm_ext.lstm`` op when the kernels are off. Per layer and direction:
the input projection of every time step is one Relax matmul (which TVM
schedules like any other), then a PrimFunc walks time serially for each
sequence, honouring its length: the reverse direction starts at
``lengths[b] - 1`` and outputs past the length are zero. Nothing is unrolled,
so the IR size does not depend on T.
"""

from __future__ import annotations

from functools import cache

import tvm
from tvm import relax
from tvm.script import tirx as T

from kokoro_tvm_ext.plugin.lstm_call import LSTMCall


@cache
def recurrence(hidden: int, reverse: bool):
    """PrimFunc(gates_x [B,T,4H], lengths [B], w_hh [4H,H], h0 [B,H], c0 [B,H]) -> y, h_n, c_n."""
    H = hidden

    @T.prim_func(private=True)
    def lstm_recurrence(
        gx_handle: T.handle,
        len_handle: T.handle,
        w_handle: T.handle,
        h0_handle: T.handle,
        c0_handle: T.handle,
        y_handle: T.handle,
        hn_handle: T.handle,
        cn_handle: T.handle,
    ):
        T.func_attr({"tirx.noalias": True})
        B = T.int64()
        steps = T.int64()
        gx = T.match_buffer(gx_handle, (B, steps, 4 * H), "float32")
        lengths = T.match_buffer(len_handle, (B,), "int64")
        w = T.match_buffer(w_handle, (4 * H, H), "float32")
        h0 = T.match_buffer(h0_handle, (B, H), "float32")
        c0 = T.match_buffer(c0_handle, (B, H), "float32")
        y = T.match_buffer(y_handle, (B, steps, H), "float32")
        h_n = T.match_buffer(hn_handle, (B, H), "float32")
        c_n = T.match_buffer(cn_handle, (B, H), "float32")
        for b in T.parallel(B):
            h = T.decl_buffer((H,), "float32")
            c = T.decl_buffer((H,), "float32")
            g = T.decl_buffer((4 * H,), "float32")
            for j in range(H):
                h[j] = h0[b, j]
                c[j] = c0[b, j]
            for s in range(steps):
                if s < lengths[b]:
                    t = T.if_then_else(reverse, lengths[b] - 1 - s, s)
                    for k in range(4 * H):
                        g[k] = gx[b, t, k]
                        for j in range(H):
                            g[k] = g[k] + w[k, j] * h[j]
                    for j in range(H):
                        i_gate = T.sigmoid(g[j])
                        f_gate = T.sigmoid(g[H + j])
                        o_gate = T.sigmoid(g[3 * H + j])
                        c[j] = f_gate * c[j] + i_gate * T.tanh(g[2 * H + j])
                        h[j] = o_gate * T.tanh(c[j])
                        y[b, t, j] = h[j]
                else:
                    for j in range(H):
                        y[b, s, j] = T.float32(0)
            for j in range(H):
                h_n[b, j] = h[j]
                c_n[b, j] = c[j]

    return lstm_recurrence


def emit_tir(bb: relax.BlockBuilder, call) -> relax.Expr:
    """Emit the whole (multi-layer, bidirectional) LSTM; returns (y, h_n, c_n).

    Each ``bb.emit`` takes one op whose arguments are bound already (see :class:`_Legalizing`).
    """
    op = relax.op
    H, D = call.hidden, call.directions
    x = call.x if call.batch_first else bb.emit(op.permute_dims(call.x, [1, 0, 2]))
    B, steps = x.ty.shape[0], x.ty.shape[1]
    lengths = call.lengths
    if lengths is None:
        full = bb.emit(op.shape_to_tensor(relax.ShapeExpr([steps])))
        lengths = bb.emit(op.broadcast_to(full, relax.ShapeExpr([B])))
    elif str(lengths.ty.dtype) != "int64":
        lengths = bb.emit(op.astype(lengths, "int64"))
    zeros = bb.emit(op.zeros(relax.ShapeExpr([B, H]), "float32")) if call.h0 is None else None
    per_dir = 4 if call.has_biases else 2
    h_list, c_list = [], []
    layer_in = x
    for layer in range(call.num_layers):
        outs = []
        for d in range(D):
            index = layer * D + d
            w = call.weights[index * per_dir : (index + 1) * per_dir]
            gates = bb.emit(op.matmul(layer_in, bb.emit(op.permute_dims(w[0], [1, 0]))))
            if call.has_biases:
                gates = bb.emit(op.add(gates, bb.emit(op.add(w[2], w[3]))))
            if call.h0 is None:
                h0 = c0 = zeros
            else:
                h0 = bb.emit(op.take(call.h0, relax.const(index, "int64"), axis=0))
                c0 = bb.emit(op.take(call.c0, relax.const(index, "int64"), axis=0))
            gvar = bb.add_func(recurrence(H, d == 1), f"kokoro_lstm_recurrence_h{H}_{'rev' if d else 'fwd'}")
            state = relax.TensorType([B, H], "float32")
            result = bb.emit(
                relax.call_tir(
                    gvar,
                    (gates, lengths, w[1], h0, c0),
                    out_ty=[relax.TensorType([B, steps, H], "float32"), state, state],
                )
            )
            outs.append(bb.emit(relax.TupleGetItem(result, 0)))
            h_list.append(bb.emit(op.expand_dims(bb.emit(relax.TupleGetItem(result, 1)), 0)))
            c_list.append(bb.emit(op.expand_dims(bb.emit(relax.TupleGetItem(result, 2)), 0)))
        layer_in = bb.emit(op.concat(outs, axis=2)) if D > 1 else outs[0]
    y = layer_in if call.batch_first else bb.emit(op.permute_dims(layer_in, [1, 0, 2]))
    h_n = bb.emit(op.concat(h_list, axis=0))
    c_n = bb.emit(op.concat(c_list, axis=0))
    return bb.emit(relax.Tuple([y, h_n, c_n]))


class _Legalizing:
    """A legalization's block builder as :func:`emit_tir` uses it: each op it emits is legalized first.

    ``LegalizeOps`` legalizes the expression a handler returns, not the bindings the handler emits, so
    those go through their ops' ``FLegalize`` here (the kernels' for the matmuls, if they are on).
    """

    def __init__(self, bb: relax.BlockBuilder):
        self._bb = bb

    def emit(self, expr: relax.Expr) -> relax.Var:
        expr = self._bb.normalize(expr)
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            legalize = expr.op.get_attr("FLegalize")
            if legalize is not None:
                expr = legalize(self._bb, expr)
        return self._bb.emit(expr)

    def add_func(self, func, name: str):
        return self._bb.add_func(func, name)


def legalize_lstm(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
    """``FLegalize`` of the ``kokoro_tvm_ext.lstm`` op without the kernels: the TIR implementation."""
    return emit_tir(_Legalizing(bb), LSTMCall.from_op(call))
