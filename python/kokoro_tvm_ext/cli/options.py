"""The options `say`, `serve` and `book` share, and the one way they load a Speaker from them."""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.errors import ArtifactMissingError, InvalidInputError

VOICE_HELP = (
    'a voice name or a blend like "af_heart:0.6,am_adam:0.4" or "af_heart(2)+am_adam(1)" '
    "(default: %(default)s; see `kokoro-tvm voices`)"
)


def add_precision_argument(parser) -> None:
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16", "int8"],
        default="fp32",
        help="bf16: the decoder's convolutions and matmuls, except the residual blocks' (f32 Winograd), on "
        "bf16 inputs and weights with f32 accumulation where the CPU has AVX512-BF16 (else f32); about "
        "32 dB SNR against PyTorch fp32 and less memory; faster than fp32 only where VDPBF16PS runs at "
        "the f32 FMA rate (AMD Zen 4). int8: the decoder's convolutions and matmuls on int8 weights (a "
        "scale per output channel) and u8 inputs with int32 sums where the CPU has AVX512-VNNI (Intel "
        "Xeon since Cascade Lake, AMD Zen 4/5), else fp32 with a notice; durations stay identical "
        "(see docs/performance.md) (default: %(default)s)",
    )


def add_model_arguments(parser, threads_help: str = "threads to run on") -> None:
    """--artifact, --weights, --precision, --threads, --lexicon."""
    parser.add_argument("--artifact", help="a compiled artifact directory (default: compile once and cache)")
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: HF cache, else the offline rebuild)")
    add_precision_argument(parser)
    parser.add_argument(
        "--threads", type=int, metavar="N", help=f"{threads_help} (default: $TVM_NUM_THREADS, else every core)"
    )
    parser.add_argument(
        "--lexicon",
        metavar="FILE",
        help="your pronunciations, over the G2P's: lines of language<TAB>word<TAB>phonemes (see docs/pronunciation.md)",
    )


def add_voice_arguments(parser, default_voice: str) -> None:
    """--voice, --lang, --speed, --seed."""
    parser.add_argument("--voice", default=default_voice, help=VOICE_HELP)
    from kokoro_tvm_ext.speech.g2p.languages import codes_text, tags_text

    parser.add_argument("--lang", help=f"the text's language, if not the voice's: {codes_text()}, or {tags_text()}")
    parser.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.1 to 10 (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed, for reproducible audio (default: %(default)s)")


def add_scheduler_arguments(parser) -> None:
    """--max-batch, --first-chunk-tokens: how the servers (HTTP, Wyoming) share the model among requests."""
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


def check_scheduler_arguments(args) -> None:
    if args.max_batch < 1:
        raise InvalidInputError(f"--max-batch must be at least 1, got {args.max_batch}")
    if args.first_chunk_tokens < 0:
        raise InvalidInputError(f"--first-chunk-tokens must be 0 or more, got {args.first_chunk_tokens}")


def check_model_arguments(args) -> None:
    """Bad values of the model options, before any slow step."""
    if args.threads is not None and args.threads < 1:
        raise InvalidInputError(f"--threads must be at least 1, got {args.threads}")
    if args.artifact and not Path(args.artifact).expanduser().is_dir():
        raise ArtifactMissingError(f"--artifact {args.artifact}: no such directory")
    lexicon(args)


def lexicon(args):
    """The --lexicon file read and checked (None without one): a malformed line is one InvalidInputError
    naming file:line."""
    if not getattr(args, "lexicon", None):
        return None
    from kokoro_tvm_ext.speech.lexicon import Lexicon

    return Lexicon.load(args.lexicon)


def check_voice_arguments(args) -> None:
    from kokoro_tvm_ext.speech.speaker import MAX_SPEED, MIN_SPEED

    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise InvalidInputError(f"--speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, got {args.speed}")
    if args.seed < 0:
        raise InvalidInputError(f"--seed must be 0 or more, got {args.seed}")


def artifact_path(args) -> Path:
    """--artifact, or the cached artifact for --weights/--precision (compiled on first use)."""
    if args.artifact:
        return Path(args.artifact).expanduser()
    from kokoro_tvm_ext.speech.artifact import ensure_artifact
    from kokoro_tvm_ext.speech.assets.weights import locate

    return ensure_artifact(locate(args.weights), precision=args.precision)


def load_speaker(args):
    """The Speaker the options describe."""
    from kokoro_tvm_ext.speech import Speaker

    if args.threads is not None:
        from kokoro_tvm_ext.model.runtime import set_num_threads

        set_num_threads(args.threads)  # before compiling: both thread pools start once
    return Speaker.load(artifact_path(args), lexicon=lexicon(args))
