"""Compile Kokoro-82M into a TVM artifact (kokoro.so + meta.json) that serves 1 to 510
tokens per call. Weights are found as for `say` (--weights, $KOKORO_TVM_WEIGHTS, the
HuggingFace cache, or the offline rebuild). Takes a few minutes on 2 cores."""

from __future__ import annotations

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


def add_precision_argument(parser) -> None:
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: the decoder's convolutions and matmuls, except the residual blocks' (f32 Winograd), on "
        "bf16 inputs and weights with f32 accumulation where the CPU has AVX512-BF16 (else f32); about "
        "32 dB SNR against PyTorch fp32 and less memory; 7-22%% faster than fp32 where VDPBF16PS runs at "
        "the f32 FMA rate (AMD Zen 4), no faster where it runs at half (Intel without AMX; see README) "
        "(default: %(default)s)",
    )


def run(args) -> int:
    from ..artifact_cache import ensure_artifact
    from ..assets import resolve

    weights = resolve(args.weights)
    if args.out:
        from ..assets.weights import load_model
        from ..compile import compile_kokoro

        out = compile_kokoro(
            load_model(weights),
            args.out,
            lstm_impl=args.lstm_impl,
            precision=args.precision,
            weights_fingerprint=weights.fingerprint(),
        )
    else:
        out = ensure_artifact(weights, lstm_impl=args.lstm_impl, precision=args.precision)
    print(out)
    return 0
