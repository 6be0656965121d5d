"""Measure Kokoro end to end: our compiled artifact vs PyTorch eager vs ONNX Runtime.

Runs two texts (48 and 309 tokens) on the same weights, voice and thread count
through every system, each in its own process, and prints one table: seconds,
audio seconds, real-time factor (RTF, lower is faster), peak memory, and our
compile time; then a per-stage breakdown. Compiling (if the artifact is not
cached yet) and ONNX conversion happen before any timing.

examples:
  kokoro-tvm bench                          all rows, 2 threads, median of 5
  kokoro-tvm bench --systems tvm torch --repeat 3
  kokoro-tvm bench --threads 1 --json rows.json
"""

from __future__ import annotations

from ..errors import MissingAssetError

HELP = "benchmark our artifact against PyTorch and ONNX Runtime"


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

    if any(s.startswith("ort") for s in args.systems):
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise MissingAssetError(
                "the ort rows need onnxruntime (pip install 'kokoro-tvm-ext[bench]'); or pick rows with "
                f"--systems, e.g. --systems tvm torch (all: {' '.join(SYSTEMS)})"
            ) from None
    return run_bench(args)
