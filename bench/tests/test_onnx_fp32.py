"""The ort-fp32 benchmark row: an int8 ONNX model with its quantization undone.

A tiny fp32 model (MatMul, Conv with bias, bidirectional LSTM) is quantized
with onnxruntime's own dynamic quantizer, which emits the same integer ops as
Kokoro's int8 export; ``dequantized_model`` must give back an integer-free graph
that computes with the dequantized weights ``(q - zero_point) * scale``.
"""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from kokoro_bench.onnx_fp32 import dequantized_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: E402

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)

INTEGER_OPS = {"MatMulInteger", "ConvInteger", "DynamicQuantizeLinear", "DynamicQuantizeLSTM"}
C, L, H = 6, 9, 5


def _fp32_model(rng) -> onnx.ModelProto:
    inits = {
        "w_mm": rng.standard_normal((C, C)).astype(np.float32),
        "w_conv": rng.standard_normal((C, C, 3)).astype(np.float32),
        "b_conv": rng.standard_normal(C).astype(np.float32),
        "w_lstm": rng.standard_normal((2, 4 * H, C)).astype(np.float32) * 0.3,
        "r_lstm": rng.standard_normal((2, 4 * H, H)).astype(np.float32) * 0.3,
        "b_lstm": rng.standard_normal((2, 8 * H)).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w_mm"], ["mm"]),  # x [1, L, C]
        helper.make_node("Transpose", ["mm"], ["mm_t"], perm=[0, 2, 1]),
        helper.make_node("Conv", ["mm_t", "w_conv", "b_conv"], ["conv"], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Transpose", ["conv"], ["seq"], perm=[2, 0, 1]),  # [L, 1, C]
        helper.make_node(
            "LSTM", ["seq", "w_lstm", "r_lstm", "b_lstm"], ["y"], hidden_size=H, direction="bidirectional"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, L, C])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("conv", TensorProto.FLOAT, None),
        ],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release reads
    return model


def _run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y", "conv"], {"x": x})


def test_dequantized_graph_is_float_and_matches_the_fp32_model(tmp_path):
    rng = np.random.default_rng(0)
    fp32 = _fp32_model(rng)
    onnx.save(fp32, tmp_path / "fp32.onnx")
    quantize_dynamic(
        tmp_path / "fp32.onnx",
        tmp_path / "int8.onnx",
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Conv", "LSTM"],
    )
    int8 = onnx.load(tmp_path / "int8.onnx")
    assert INTEGER_OPS & {n.op_type for n in int8.graph.node}, "the quantizer produced no integer ops"

    back = dequantized_model(int8)
    assert not INTEGER_OPS & {n.op_type for n in back.graph.node}

    # Reference: the fp32 model with each weight replaced by (q - zero_point) * scale,
    # read straight from the quantized model's initializers.
    q = {i.name: numpy_helper.to_array(i) for i in int8.graph.initializer}
    expected = onnx.ModelProto()
    expected.CopyFrom(fp32)
    for init in expected.graph.initializer:
        if f"{init.name}_quantized" not in q:
            continue  # biases stay float
        w = q[f"{init.name}_quantized"].astype(np.float32)
        zp, scale = (q[f"{init.name}_{k}"].astype(np.float32) for k in ("zero_point", "scale"))
        if init.name.endswith("_lstm"):  # per direction; stored as [dirs, rows, 4H]
            w = ((w - zp.reshape(-1, 1, 1)) * scale.reshape(-1, 1, 1)).transpose(0, 2, 1)
        else:
            w = (w - zp) * scale
        init.CopyFrom(numpy_helper.from_array(w.astype(np.float32), init.name))

    x = rng.standard_normal((1, L, C)).astype(np.float32)
    for got, want in zip(_run(back, x), _run(expected, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
