"""LSTM → one Relax call, whatever T is.

Two ops reach here:
- ``lstm.default``: our ``kokoro_tvm_ext::lstm`` custom op (torch_lstm.py),
  which carries per-sample lengths;
- ``lstm.input``: upstream ``aten.lstm.input`` (kept whole by our
  decomposition table in frontend/__init__.py).

Both become a single call of the Relax op ``kokoro_tvm_ext.lstm`` (impl="plugin",
see :func:`lstm_op`), which legalizes to the Rust kernel in our pipeline
(``DispatchToPluginKernels``) and in stock pipelines with the kernels enabled
(``kokoro_tvm_ext.kernels_enabled()``), and to the TIR implementation otherwise; or
directly to that TIR implementation, Relax ops plus PrimFuncs with a serial time
loop (impl="tir", see lstm_tir.py). Either way the IR size does not depend on T.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from tvm import relax

from kokoro_tvm_ext.plugin.frontend.common import tensor_dtype
from kokoro_tvm_ext.plugin.legalize.switch import lstm_op
from kokoro_tvm_ext.plugin.lstm_call import LSTMCall


def check(call: LSTMCall) -> None:
    """Reject what the kernels do not support, at conversion time, with the reason."""
    if tensor_dtype(call.x) != "float32":
        raise TypeError(f"lstm: input must be float32, got {tensor_dtype(call.x)}")
    if len(call.x.ty.shape) != 3:
        raise ValueError(f"lstm: input must be 3-D, got shape {call.x.ty.shape}")
    per_dir = 4 if call.has_biases else 2
    want = call.num_layers * call.directions * per_dir
    if len(call.weights) != want:
        raise ValueError(f"lstm: expected {want} weight tensors, got {len(call.weights)}")
    if (call.h0 is None) != (call.c0 is None):
        raise ValueError("lstm: give both h0 and c0, or neither")


def emit_plugin(bb: relax.BlockBuilder, call: LSTMCall) -> relax.Expr:
    """One call of the ``kokoro_tvm_ext.lstm`` op, which the Rust library types."""
    check(call)
    if call.lengths is not None and tensor_dtype(call.lengths) != "int64":
        call = replace(call, lengths=bb.emit(relax.op.astype(call.lengths, "int64")))
    return bb.emit(relax.Call(lstm_op(), call.op_arguments()))


def emit(bb, call: LSTMCall, impl: str) -> relax.Expr:
    if impl == "plugin":
        return emit_plugin(bb, call)
    if impl == "tir":
        from kokoro_tvm_ext.plugin.legalize.lstm_tir import emit_tir

        check(call)
        return emit_tir(bb, call)
    raise ValueError(f"lstm: unknown impl {impl!r}; use 'plugin' or 'tir'")


def convert_custom_lstm(node, importer, impl: str = "plugin"):
    """``kokoro_tvm_ext::lstm(x, lengths, h0, c0, weights, L, bidir, batch_first, biases)``."""
    x, lengths, h0, c0, weights, num_layers, bidirectional, batch_first, has_biases = importer.retrieve_args(node)
    call = LSTMCall(x, lengths, h0, c0, list(weights), num_layers, bidirectional, batch_first, has_biases)
    return emit(importer.block_builder, call, impl)


def convert_aten_lstm(node, importer, impl: str = "plugin"):
    """``aten.lstm.input(x, hx, params, has_biases, L, dropout, train, bidir, batch_first)``."""
    args = importer.retrieve_args(node)
    x, hx, params, has_biases, num_layers = args[:5]
    bidirectional, batch_first = args[7], args[8]
    h0, c0 = (hx[0], hx[1]) if hx else (None, None)
    call = LSTMCall(x, None, h0, c0, list(params), num_layers, bidirectional, batch_first, has_biases)
    return emit(importer.block_builder, call, impl)


def lstm_converters(impl: str) -> dict:
    """The converter entries for one LSTM implementation."""

    return {
        "lstm.default": partial(convert_custom_lstm, impl=impl),
        "lstm.input": partial(convert_aten_lstm, impl=impl),
    }
