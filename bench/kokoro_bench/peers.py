"""The runtimes the benchmark measures us against.

Every runner is built inside the row's worker process and given the same
weights: hexgrad's KModel for the PyTorch rows, and for ONNX Runtime and
OpenVINO the int8 export our weights come from, or that graph dequantized to
fp32 (``onnx_fp32``). The peers are ``(ids, style) -> audio``; PyTorch eager is
a model for our ``Speaker`` (``TorchKokoro(own_noise=True)``), so its row speaks through the same
pipeline as ours. ``Unavailable`` says why a row cannot run on this machine (a
package missing or built for another torch); the table shows the reason instead
of a number.
"""

from __future__ import annotations

import time


class Unavailable(RuntimeError):
    """This row cannot run here; the message says why and what would fix it."""


def torch_eager(weights: str, threads: int):
    """KModel loaded from ``weights`` on ``threads`` threads, as a model for ``Speaker``: its own
    ``forward_with_tokens`` drawing its own noise (PyTorch's own speed; its fidelity columns are the
    noise floor)."""
    from kokoro_tvm_ext.model.adapters.reference import TorchKokoro
    from kokoro_tvm_ext.model.weights import load_kmodel

    return TorchKokoro(load_kmodel(weights), num_threads=threads, own_noise=True)


def torch_compiled(weights: str, threads: int, backend: str):
    """``torch.compile`` of KModel's forward (graph breaks at the data-dependent durations);
    ``backend`` is "inductor" or "zentorch" (AMD's, from the zentorch package)."""
    import torch

    if backend == "zentorch":
        try:
            import zentorch  # noqa: F401  (registers the backend)
        except ModuleNotFoundError:
            raise Unavailable(
                f"zentorch is not installed (pip install zentorch, built for torch {torch.__version__})"
            ) from None
        except ImportError as err:  # zentorch wheels are built for one torch minor version
            raise Unavailable(f"zentorch does not load with torch {torch.__version__}: {err}") from None
    forward = torch.compile(torch_eager(weights, threads).model.forward_with_tokens, backend=backend)

    def run(ids, style):
        with torch.no_grad():
            audio, _ = forward(torch.from_numpy(ids), torch.from_numpy(style), 1.0)
        return audio.numpy()

    return run


def onnxruntime_session(onnx_path: str, threads: int):
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    return lambda ids, style: session.run(None, _onnx_feed(np, ids, style))[0]


def openvino_model(onnx_path: str, threads: int, precision: str):
    """OpenVINO's CPU plugin on the fp32 ONNX graph with the inference precision hint
    ``precision`` ("f32" or "bf16"; OpenVINO falls back to f32 where it has no bf16 path for the
    CPU (older x86; every aarch64 CPU in its source today), and ``run.precision`` says what it chose)."""
    import numpy as np

    try:
        import openvino as ov
    except ImportError:
        raise Unavailable("the openvino rows need OpenVINO: pip install 'kokoro-tvm-ext[bench]'") from None
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(onnx_path),
        "CPU",
        {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"},
    )
    request = compiled.create_infer_request()

    def run(ids, style):
        return next(iter(request.infer(_onnx_feed(np, ids, style)).values()))

    run.precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
    return run


def _onnx_feed(np, ids, style) -> dict:
    return {"tokens": ids, "style": style, "speed": np.ones(1, np.float32)}


def first_call_seconds(call) -> float:
    """Time of the first ``call()`` (for the compiled torch rows this is where compiling happens)."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
