"""Compile Kokoro-82M for this exact CPU into a TVM artifact (kokoro.so + weights.bin + meta.json)
that serves 1 to 510 tokens per call. Weights are found as for `say` (--weights, $KOKORO_TVM_WEIGHTS,
the HuggingFace cache, or the offline rebuild). Takes a few minutes on 2 cores. Into the user cache
(no --out), the result is preferred to a prebuilt portable library from then on, for any weights."""

from __future__ import annotations

from kokoro_tvm_ext.cli.options import add_precision_argument

HELP = "compile Kokoro into a deployable TVM artifact"


def add_arguments(parser) -> None:
    parser.add_argument("-o", "--out", help="output directory (default: the user cache, where `say` looks)")
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: see above)")
    parser.add_argument(
        "--lstm-impl",
        choices=["plugin", "tir"],
        default="plugin",
        help="plugin: the Rust LSTM kernel (fast); tir: a TIR loop, for artifacts that must "
        "run without this plugin's LSTM (default: %(default)s)",
    )
    add_precision_argument(parser)


def run(args) -> int:
    from kokoro_tvm_ext.errors import MissingAssetError
    from kokoro_tvm_ext.model.artifact_cache import compiler_installed
    from kokoro_tvm_ext.speech import resolve
    from kokoro_tvm_ext.speech.artifact import ensure_artifact

    if not compiler_installed():
        raise MissingAssetError('compiling needs torch and kokoro: pip install "kokoro-tvm-ext[compile]"')
    weights = resolve(args.weights)
    if args.out:
        from kokoro_tvm_ext.model.compile import compile_kokoro
        from kokoro_tvm_ext.speech.assets.weights import load_model

        out = compile_kokoro(
            load_model(weights),
            args.out,
            lstm_impl=args.lstm_impl,
            precision=args.precision,
            weights_fingerprint=weights.fingerprint(),
        )
    else:
        # For this CPU: a prebuilt portable library is not what `compile` asks for.
        out = ensure_artifact(weights, lstm_impl=args.lstm_impl, precision=args.precision, prebuilt=False)
    print(out)
    return 0
