"""An fp32 ONNX model with exactly the weights our other rows use, for the ort-fp32 row (``onnx_model``: the
int8 export or this, cached; for e2e.py's rows and the peers of venv_peers.py and first_audio.py).

``torch.onnx`` cannot export hexgrad's KModel (packed sequences, data-dependent
lengths), and our offline weights are themselves dequantized from the int8
export. So the fair fp32 ONNX baseline is that same export with its
quantization undone: every integer op is replaced by its float op on the
dequantized weight (the formula ``model/weights/rebuild.py`` uses), and every
activation stays fp32.

- ``DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scales)``  => ``MatMul``
- ``DynamicQuantizeLinear -> ConvInteger [-> Add(int bias)] -> Cast -> Mul(scale)``
  => ``Conv`` (with the float bias the int bias was quantized from)
- ``DynamicQuantizeLSTM`` => ``LSTM`` (weights transposed to ONNX LSTM's [dirs, 4H, in])

Nodes left without consumers are dropped afterwards.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np


def dequantized_model(int8_model):
    """A new ``onnx.ModelProto``: ``int8_model`` with every integer op in fp32."""
    import onnx
    from onnx import helper, numpy_helper

    from kokoro_tvm_ext.model.weights.rebuild import _dequant, _Graph

    g = _Graph(int8_model)
    new_inits: list = []
    made: set[str] = set()
    replaced: dict[int, object] = {}  # id(last node of a quantized chain) -> its float replacement

    def weight(name_hint: str, array: np.ndarray) -> str:
        name = f"{name_hint}_fp32"  # ALBERT's layers share weights: convert each once
        if name not in made:
            made.add(name)
            new_inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def float_input(node) -> str:
        """The fp32 tensor a DynamicQuantizeLinear quantized."""
        dql = g.producer[node.input[0]]
        assert dql.op_type == "DynamicQuantizeLinear", dql.op_type
        return dql.input[0]

    def chain_end(node):
        """Follow [Add(int bias)] -> Cast -> Mul(scale) to the Mul that yields the float result."""
        bias, cur = None, node
        while True:
            (nxt,) = g.consumers[cur.output[0]]
            if nxt.op_type == "Add":
                bias = nxt.input[1] if nxt.input[0] == cur.output[0] else nxt.input[0]
            elif nxt.op_type == "Mul":
                return nxt, bias
            elif nxt.op_type != "Cast":
                raise ValueError(f"unexpected {nxt.op_type} after {node.op_type} {node.name}")
            cur = nxt

    def float_bias(int_bias: str) -> str:
        """Reshape(Cast(Floor(Div(bias_fp32, scale)))) -> the fp32 bias initializer."""
        name = int_bias
        while not g.is_init(name):
            name = g.producer[name].input[0]
        return name

    for n in g.nodes:
        if n.op_type == "MatMulInteger":
            w = _dequant(g.array(n.input[1]), g.optional(n, 3), g.weight_scale(n))
            end, _ = chain_end(n)
            replaced[id(end)] = helper.make_node(
                "MatMul",
                [float_input(n), weight(n.input[1], w)],
                list(end.output),
                name=f"{n.name or n.output[0]}_fp32",
            )
        elif n.op_type == "ConvInteger":
            w = _dequant(g.array(n.input[1]), g.optional(n, 3), g.weight_scale(n))
            end, bias = chain_end(n)
            inputs = [float_input(n), weight(n.input[1], w)] + ([float_bias(bias)] if bias else [])
            conv = helper.make_node("Conv", inputs, list(end.output), name=f"{n.name or n.output[0]}_fp32")
            conv.attribute.extend(n.attribute)
            replaced[id(end)] = conv
        elif n.op_type == "DynamicQuantizeLSTM":
            # inputs: X, W, R, B, seq_lens, h0, c0, P, W_scale, W_zp, R_scale, R_zp
            def deq(q, scale, zp):  # per direction: [dirs, rows, 4H] -> [dirs, 4H, rows]
                s = g.array(scale).reshape(-1, 1, 1)
                z = g.array(zp).reshape(-1, 1, 1)
                return _dequant(g.array(q), z, s).transpose(0, 2, 1)

            w = weight(n.input[1], deq(n.input[1], n.input[8], n.input[9]))
            r = weight(n.input[2], deq(n.input[2], n.input[10], n.input[11]))
            lstm = helper.make_node(
                "LSTM", [n.input[0], w, r, *n.input[3:7]], list(n.output), name=f"{n.name or n.output[0]}_fp32"
            )
            lstm.attribute.extend(
                a for a in n.attribute if a.name in ("direction", "hidden_size", "activations", "clip")
            )
            replaced[id(n)] = lstm

    nodes = [replaced.get(id(n), n) for n in g.nodes]
    nodes = _drop_dead(nodes, {o.name for o in int8_model.graph.output})
    used = {x for n in nodes for x in n.input}
    graph = helper.make_graph(
        nodes,
        int8_model.graph.name + "_fp32",
        list(int8_model.graph.input),
        list(int8_model.graph.output),
        [i for i in list(int8_model.graph.initializer) + new_inits if i.name in used],
    )
    model = helper.make_model(graph, opset_imports=list(int8_model.opset_import))
    model.ir_version = int8_model.ir_version
    onnx.checker.check_model(model)  # structure only: the contrib ops are ORT's
    return model


def _drop_dead(nodes: list, outputs: set[str]) -> list:
    """Remove nodes none of whose outputs is consumed or a graph output (to a fixed point)."""
    while True:
        consumers = defaultdict(int)
        for n in nodes:
            for x in n.input:
                consumers[x] += 1
        alive = [n for n in nodes if any(o in outputs or consumers[o] for o in n.output)]
        if len(alive) == len(nodes):
            return nodes
        nodes = alive


def onnx_model(precision: str) -> Path:
    """The int8 export our weights come from, or (fp32) the same graph dequantized."""
    from kokoro_tvm_ext.model.weights.onnx_parts import assemble_onnx
    from kokoro_tvm_ext.support.cache import atomic_write, cache_dir

    int8 = cache_dir() / "bench" / "kokoro-v1.0.int8.onnx"
    if not int8.is_file():
        with atomic_write(int8) as f:
            f.write(assemble_onnx())
    if precision == "int8":
        return int8
    fp32 = cache_dir() / "bench" / "kokoro-v1.0.dequantized-fp32.onnx"
    if not fp32.is_file():
        import onnx

        with atomic_write(fp32) as f:
            f.write(dequantized_model(onnx.load(str(int8))).SerializeToString())
    return fp32
