"""The encoder's network as a Relax module, built directly from its numpy weights (no torch, no export).

``main(mels: float32 [n, 160, 40]) -> float32 [n, 256]``, ``n`` symbolic: the plugin's LSTM op
(``kokoro_tvm_ext.lstm``, three layers, batch first, with biases, the same call the frontend makes for Kokoro's
LSTMs), the last layer's final hidden state, a linear layer (``relax.op.linear``: the matmul the plugin's GEMM
kernel takes, its bias folded in), ReLU and an L2 normalisation. The weights are constants of the module.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from kokoro_tvm_ext.model.speaker_encoder.spec import LAYERS, N_MELS, PARTIAL_FRAMES, lstm_weight_names
from kokoro_tvm_ext.plugin.frontend.lstm import emit_plugin
from kokoro_tvm_ext.plugin.lstm_call import LSTMCall


def build_module(weights: dict[str, np.ndarray]):
    """The IRModule of the encoder's network with these weights."""
    n = tvm.tirx.Var("n", "int64")
    mels = relax.Var("mels", relax.TensorType([n, PARTIAL_FRAMES, N_MELS], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [mels]):
        with bb.dataflow():
            lstm_weights = [relax.const(weights[name]) for name in lstm_weight_names()]
            call = LSTMCall(mels, None, None, None, lstm_weights, LAYERS, False, True, True)
            outputs = emit_plugin(bb, call)  # (y, h_n, c_n)
            h_n = bb.emit(relax.TupleGetItem(outputs, 1))  # [layers, n, hidden]
            last = bb.emit(relax.op.squeeze(relax.op.strided_slice(h_n, [0], [LAYERS - 1], [LAYERS]), [0]))
            linear = bb.emit(
                relax.op.linear(last, relax.const(weights["linear.weight"]), relax.const(weights["linear.bias"]))
            )
            embeds = bb.emit(relax.op.nn.relu(linear))
            norm = bb.emit(relax.op.sqrt(relax.op.sum(relax.op.multiply(embeds, embeds), axis=[1], keepdims=True)))
            out = bb.emit_output(relax.op.divide(embeds, norm))
        bb.emit_func_output(out)
    return bb.get()
