"""Serve speech over HTTP: OpenAI's /v1/audio/speech plus Kokoro-FastAPI's extensions.

Starts on the cached artifact (compiling it on the first start), warms the model up,
then answers requests on one model shared by a chunk-level scheduler. Endpoints:
POST /v1/audio/speech, POST /dev/captioned_speech, GET /v1/audio/voices,
GET /v1/models, GET /health (200 once it can synthesize).

Examples:
  kokoro-tvm serve                                   # http://127.0.0.1:8880
  kokoro-tvm serve --host 0.0.0.0 --port 8880 --threads 2
  curl -s localhost:8880/v1/audio/speech -H 'Content-Type: application/json' \\
       -d '{"input": "Hello there.", "response_format": "wav"}' -o hello.wav"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import ArtifactMissingError, InvalidInputError, MissingAssetError
from .compile import add_precision_argument

HELP = "serve an OpenAI-compatible speech API (streaming, word timestamps)"


def add_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8880, help="port (default: %(default)s)")
    add_precision_argument(parser)
    parser.add_argument(
        "--threads", type=int, metavar="N", help="threads for the model (default: $TVM_NUM_THREADS, else every core)"
    )
    parser.add_argument(
        "--max-input-chars",
        type=int,
        default=10_000,
        metavar="N",
        help="longest input accepted; longer gets 413 (default: %(default)s)",
    )
    parser.add_argument("--artifact", help="a compiled artifact directory (default: compile once and cache)")
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: HF cache, else the offline rebuild)")
    parser.add_argument(
        "--backend",
        choices=("tvm", "torch"),
        default="tvm",
        help="tvm: the compiled artifact; torch: PyTorch eager KModel, for comparison (default: %(default)s)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=4,
        metavar="N",
        help="first chunks of different requests synthesized in one call (default: %(default)s)",
    )
    parser.add_argument(
        "--first-chunk-tokens",
        type=int,
        default=24,
        metavar="N",
        help="cut the first chunk after at most N phoneme tokens (whole words) so the first "
        "audio comes early; 0 = the whole first clause (default: %(default)s, ~1.5 s of speech)",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="uvicorn's log level (default: %(default)s)",
    )


def _check(args) -> None:
    if not 0 <= args.port <= 65535:
        raise InvalidInputError(f"--port must be 0..65535, got {args.port}")
    if args.threads is not None and args.threads < 1:
        raise InvalidInputError(f"--threads must be at least 1, got {args.threads}")
    if args.max_input_chars < 1:
        raise InvalidInputError(f"--max-input-chars must be at least 1, got {args.max_input_chars}")
    if args.max_batch < 1:
        raise InvalidInputError(f"--max-batch must be at least 1, got {args.max_batch}")
    if args.first_chunk_tokens < 0:
        raise InvalidInputError(f"--first-chunk-tokens must be 0 or more, got {args.first_chunk_tokens}")
    if args.artifact and not Path(args.artifact).is_dir():
        raise ArtifactMissingError(f"--artifact {args.artifact}: no such directory")


def build_backend(args):
    """The model the server runs (compiling the artifact on the first start)."""
    if args.backend == "torch":
        from ..serve.backends import TorchBackend

        return TorchBackend(args.weights, num_threads=args.threads)
    from ..serve.backends import TvmBackend

    if args.threads is not None:
        from ..runtime import set_num_threads

        set_num_threads(args.threads)  # before compiling: both pools start once
    if args.artifact:
        artifact = Path(args.artifact)
    else:
        from ..artifact_cache import ensure_artifact
        from ..assets.weights import locate

        artifact = ensure_artifact(locate(args.weights), precision=args.precision)
    return TvmBackend(artifact)


def warm_up(backend) -> None:
    """G2P and one short synthesis: loads everything and starts the thread pools before serving."""
    import numpy as np

    from ..assets import load_config, tokenize
    from ..model_spec import STYLE_DIM
    from ..serve.languages import words

    vocab = load_config()["vocab"]
    phonemes = "".join(w.phonemes for w in words("Hello.", "a"))
    tokens = np.array(tokenize(phonemes, vocab), np.int64)
    list(backend.iter_batch([tokens], [np.zeros((1, STYLE_DIM), np.float32)], [4.0], [0]))


def run(args) -> int:
    _check(args)
    try:
        import av  # noqa: F401
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as err:
        raise MissingAssetError(f"serving needs {err.name}: pip install 'kokoro-tvm-ext[serve]'") from None

    from ..serve.app import create_app
    from ..serve.plan import Limits

    print(f"kokoro-tvm serve: loading the {args.backend} backend", file=sys.stderr)
    backend = build_backend(args)
    warm_up(backend)
    limits = Limits(
        max_input_chars=args.max_input_chars, max_tokens=backend.max_tokens, first_chunk_tokens=args.first_chunk_tokens
    )
    app = create_app(backend, limits=limits, max_batch=args.max_batch)
    print(f"kokoro-tvm serve: listening on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
