"""The benchmark's peer runners on a tiny ONNX graph with Kokoro's inputs.

The graph computes ``tokens * sum(style) * speed`` so the expected audio is a
numpy one-liner; OpenVINO (both precision hints) and ONNX Runtime must return it.
"""

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from kokoro_bench import peers  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["tokens"], ["t"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["style"], ["s"], keepdims=1),
            helper.make_node("Mul", ["t", "s"], ["ts"]),
            helper.make_node("Mul", ["ts", "speed"], ["audio"]),
        ],
        "kokoro_like",
        [
            helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "T"]),
            helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, 256]),
            helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, "T"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    onnx.save(model, str(path))
    return str(path)


def _inputs():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 178, (1, 13)).astype(np.int64)
    style = (rng.standard_normal((1, 256)) * 0.01).astype(np.float32)
    return ids, style, ids.astype(np.float32) * style.sum()


@pytest.mark.parametrize("precision", ["f32", "bf16"])
def test_openvino_runner_matches_the_graph(tiny_onnx, precision):
    pytest.importorskip("openvino")
    ids, style, want = _inputs()
    run = peers.openvino_model(tiny_onnx, threads=2, precision=precision)
    got = np.asarray(run(ids, style))
    assert got.shape == want.shape
    # bf16 only where the CPU has bf16 instructions: then ~3 significant digits
    tol = 1e-5 if run.precision == "f32" else 1e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert run.precision in ("f32", "bf16")


def test_onnxruntime_runner_matches_the_graph(tiny_onnx):
    pytest.importorskip("onnxruntime")
    ids, style, want = _inputs()
    np.testing.assert_allclose(peers.onnxruntime_session(tiny_onnx, threads=2)(ids, style), want, rtol=1e-5)


def test_zentorch_row_says_why_it_cannot_run():
    torch = pytest.importorskip("torch")
    try:
        import zentorch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("zentorch loads here")
    with pytest.raises(peers.Unavailable, match=re.escape(f"torch {torch.__version__}")):
        peers.torch_compiled("unused", threads=1, backend="zentorch")
