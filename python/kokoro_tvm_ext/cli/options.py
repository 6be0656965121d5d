"""The options `say`, `serve`, `wyoming` and `book` share, and the one config they open a Speaker from."""

from __future__ import annotations

import json
from pathlib import Path

from kokoro_tvm_ext.serve.openai_voices import OPENAI_VOICES, parse_alias
from kokoro_tvm_ext.serve.options import check_scheduling
from kokoro_tvm_ext.serve.scheduler import MAX_BATCH
from kokoro_tvm_ext.speech.chunks import FIRST_CHUNK_TOKENS
from kokoro_tvm_ext.speech.config import PRECISIONS, SpeakerConfig
from kokoro_tvm_ext.speech.languages import codes_text, tags_text
from kokoro_tvm_ext.speech.markup import check_aliases
from kokoro_tvm_ext.speech.speaker import MAX_SPEED, MIN_SPEED
from kokoro_tvm_ext.support.errors import InvalidInputError

VOICE_HELP = (
    'a voice name or a blend like "af_heart:0.6,am_adam:0.4" or "af_heart(2)+am_adam(1)" '
    "(default: %(default)s; see `kokoro-tvm voices`)"
)


def add_precision_argument(parser) -> None:
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="bf16: the decoder's convolutions and matmuls, except the residual blocks' (f32 Winograd), on "
        "bf16 inputs and weights with f32 accumulation where the CPU has AVX512-BF16 (else the fp32 artifact); about "
        "32 dB SNR against PyTorch fp32 and less memory; faster than fp32 only where VDPBF16PS runs at "
        "the f32 FMA rate (AMD Zen 4). int8: the decoder's convolutions and matmuls on int8 weights (a "
        "scale per output channel) and u8 inputs with int32 sums where the CPU has AVX512-VNNI (Intel "
        "Xeon since Cascade Lake, AMD Zen 4/5), else the fp32 artifact with a notice; durations stay identical "
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

    parser.add_argument("--lang", help=f"the text's language, if not the voice's: {codes_text()}, or {tags_text()}")
    parser.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.1 to 10 (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed, for reproducible audio (default: %(default)s)")


def add_cast_arguments(parser) -> None:
    """--voice-alias, --cast: the names [voice:NAME] tags and SSML's <voice name> may use."""
    parser.add_argument(
        "--voice-alias",
        action="append",
        default=[],
        metavar="NAME=VOICE",
        help="a name for a voice or blend in [voice:NAME] tags (repeatable); OpenAI's voice names are aliases too",
    )
    parser.add_argument(
        "--cast",
        metavar="FILE",
        help='a JSON object of aliases, as Kokoro-FastAPI\'s voice_aliases: {"narrator": "bm_george", '
        '"alice": {"voice": "af_heart", "rate": 1.1}}',
    )


def cast_aliases(args) -> dict:
    """The aliases --cast and --voice-alias give (a flag wins over the file), over OpenAI's voice names."""
    aliases: dict = dict(OPENAI_VOICES)
    if args.cast:
        path = Path(args.cast).expanduser()
        try:
            cast = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise InvalidInputError(f"--cast {args.cast}: cannot read it ({err.strerror})") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InvalidInputError(f"--cast {args.cast} is not JSON: {err}") from None
        aliases.update(check_aliases(cast, f"--cast {args.cast}"))
    for flag in args.voice_alias:
        name, voice = parse_alias(flag)
        aliases[name] = voice
    return check_aliases(aliases, "--voice-alias")


def add_scheduler_arguments(parser) -> None:
    """--max-batch, --first-chunk-tokens: how the servers (HTTP, Wyoming) share the model among requests."""
    parser.add_argument(
        "--max-batch",
        type=int,
        default=MAX_BATCH,
        metavar="N",
        help="first chunks of different requests synthesized in one call (default: %(default)s)",
    )
    parser.add_argument(
        "--first-chunk-tokens",
        type=int,
        default=FIRST_CHUNK_TOKENS,
        metavar="N",
        help="a request's first sentence longer than 60 tokens is cut after its first clause, so its audio comes "
        "early; N > 0 cuts any first sentence longer than N tokens, and that clause after at most N phoneme tokens "
        "(whole words; 24 is ~1.5 s of speech), for earlier audio but a break in the voice, and samples that differ "
        "from `say`'s (default: %(default)s = the whole clause, past 60 tokens)",
    )


def check_scheduler_arguments(args) -> None:
    check_scheduling(args.max_batch, args.first_chunk_tokens, as_flags=True)


def check_voice_arguments(args) -> None:

    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise InvalidInputError(f"--speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, got {args.speed}")
    if args.seed < 0:
        raise InvalidInputError(f"--seed must be 0 or more, got {args.seed}")


def model_config(args) -> SpeakerConfig:
    """The model options (``add_model_arguments``, and ``--backend`` where a command has it) as the one
    :class:`~kokoro_tvm_ext.speech.config.SpeakerConfig` every front end opens, as given (not checked)."""
    return SpeakerConfig(
        artifact=Path(args.artifact).expanduser() if args.artifact else None,
        weights=args.weights,
        precision=args.precision,
        threads=args.threads,
        lexicon=args.lexicon,
        backend=getattr(args, "backend", "tvm"),
    )


def speaker_config(args) -> SpeakerConfig:
    """``model_config(args)`` checked and with its lexicon read: a bad value is one line naming the flag, before
    any slow step."""
    config = model_config(args)
    config.check(as_flags=True)
    return config.with_lexicon_read()


def add_log_level_argument(parser, what: str) -> None:
    """--log-level: ``what`` it sets, for the servers (HTTP, Wyoming)."""
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help=f"{what} (default: %(default)s)",
    )
