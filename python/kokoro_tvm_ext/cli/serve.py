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

from kokoro_tvm_ext.cli.options import add_model_arguments, check_model_arguments
from kokoro_tvm_ext.errors import InvalidInputError, MissingAssetError

HELP = "serve an OpenAI-compatible speech API (streaming, word timestamps)"


def add_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8880, help="port (default: %(default)s)")
    add_model_arguments(parser, threads_help="threads for the model")
    parser.add_argument(
        "--max-input-chars",
        type=int,
        default=10_000,
        metavar="N",
        help="longest input accepted; longer gets 413 (default: %(default)s)",
    )
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
    if args.max_input_chars < 1:
        raise InvalidInputError(f"--max-input-chars must be at least 1, got {args.max_input_chars}")
    if args.max_batch < 1:
        raise InvalidInputError(f"--max-batch must be at least 1, got {args.max_batch}")
    if args.first_chunk_tokens < 0:
        raise InvalidInputError(f"--first-chunk-tokens must be 0 or more, got {args.first_chunk_tokens}")
    check_model_arguments(args)


def load_speaker(args):
    """The Speaker the server runs: on the compiled artifact (compiled on the first start) or PyTorch."""
    from kokoro_tvm_ext.speech import Speaker

    if args.backend == "torch":
        from kokoro_tvm_ext.model.adapters.reference import TorchKokoro
        from kokoro_tvm_ext.speech import load_model

        return Speaker(TorchKokoro(load_model(args.weights), num_threads=args.threads))
    from kokoro_tvm_ext.cli.options import load_speaker as load_compiled

    return load_compiled(args)


def run(args) -> int:
    _check(args)
    try:
        import av  # noqa: F401
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as err:
        raise MissingAssetError(f"serving needs {err.name}: pip install 'kokoro-tvm-ext[serve]'") from None

    from kokoro_tvm_ext.serve.app import create_app
    from kokoro_tvm_ext.serve.plan import Limits

    print(f"kokoro-tvm serve: loading the {args.backend} backend", file=sys.stderr)
    speaker = load_speaker(args)
    speaker.warm_up()
    limits = Limits(
        max_input_chars=args.max_input_chars, max_tokens=speaker.max_tokens, first_chunk_tokens=args.first_chunk_tokens
    )
    app = create_app(speaker, limits=limits, max_batch=args.max_batch)
    print(f"kokoro-tvm serve: listening on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
