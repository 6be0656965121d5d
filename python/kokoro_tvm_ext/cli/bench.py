"""Measure Kokoro end to end: our compiled artifact vs PyTorch (eager, torch.compile,
zentorch), OpenVINO and ONNX Runtime.

Runs two texts (48 and 309 tokens) on the same weights, voice and thread count
through every system, each in its own process, and prints one table: seconds,
audio seconds, real-time factor (RTF, lower is faster), peak memory, each row's
compile or conversion time, and how far its audio is from PyTorch fp32 (log-mel
L1, multi-resolution STFT distance, SNR, Whisper's word error rate); then how
our RTF compares with the fastest other row, and a per-stage breakdown.

examples:
  kokoro-tvm bench                          all rows, 2 threads, median of 5
  kokoro-tvm bench --systems tvm torch --repeat 3
  kokoro-tvm bench --systems tvm openvino-fp32 openvino-bf16 --no-transcribe
  kokoro-tvm bench --threads 1 --json rows.json
"""

from __future__ import annotations

from ..errors import MissingAssetError

HELP = "benchmark our artifact against PyTorch, OpenVINO and ONNX Runtime"


def add_arguments(parser) -> None:
    from ..benchmark.e2e import add_arguments as bench_arguments
    from ..benchmark.serve_load import add_arguments as serve_arguments

    bench_arguments(parser)
    parser.add_argument(
        "--serve",
        action="store_true",
        help="instead: load-test `kokoro-tvm serve` with 1, 4, 16 openai clients, ours vs torch",
    )
    serve_arguments(parser)


def run(args) -> int:
    from ..benchmark.e2e import SYSTEMS
    from ..benchmark.e2e import run as run_bench

    if args.serve:
        from ..benchmark.serve_load import run as run_serve

        return run_serve(args)

    from importlib.util import find_spec

    rows = {"ort": "onnxruntime", "openvino": "openvino"}  # row prefix -> the runtime it needs
    missing = [m for prefix, m in rows.items() if any(s.startswith(prefix) for s in args.systems) and not find_spec(m)]
    missing += [] if find_spec("librosa") else ["librosa"]  # the fidelity columns' mel filters
    if missing:
        raise MissingAssetError(
            f"the bench needs {' and '.join(missing)}: pip install 'kokoro-tvm-ext[bench]'; or pick rows with "
            f"--systems, e.g. --systems tvm torch (all: {' '.join(SYSTEMS)})"
        )
    return run_bench(args)
