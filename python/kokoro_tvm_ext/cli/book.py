"""Speak a whole book: EPUB, markdown or text in, an audiobook with chapters out.

Chapters come from the EPUB's table of contents, markdown's top-level # headings, or
the heading-like lines of a text file. The output is a .m4b or .mp3 with chapter
markers, or a directory with one file per chapter (--format). Finished chapters are
kept in a work directory beside the output (.NAME.book/) until the book is written,
so an interrupted run picks up where it stopped; a changed chapter or setting is
spoken again. --ray spreads the work over a Ray cluster; the audio is sample-identical
to a single-process run (each chunk's noise seed comes from its position in the book).

Examples:
  kokoro-tvm book novel.epub -o novel.m4b
  kokoro-tvm book essay.md -o essay.mp3 --voice bf_emma --subtitles
  kokoro-tvm book story.txt -o story/ --format flac
  kokoro-tvm book novel.epub -o novel.m4b --ray auto            # on the Ray cluster of this machine
  kokoro-tvm book novel.epub -o novel.m4b --ray 10.0.0.5:6379"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from ..assets.voices import DEFAULT_VOICE
from ..errors import InvalidInputError
from .compile import add_precision_argument

HELP = "speak an EPUB, markdown or text book to an audiobook (resumable; --ray for a cluster)"


def add_arguments(parser) -> None:
    parser.add_argument("input", help="the book: .epub, .md or .txt")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        help="a .m4b or .mp3 file (with chapter markers), or a directory for one file per chapter",
    )
    parser.add_argument(
        "--voice", default=DEFAULT_VOICE, help="a voice name or blend, as for `say` (default: %(default)s)"
    )
    parser.add_argument("--lang", help="the book's language, if not the voice's (as for `say`)")
    parser.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.1 to 10 (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="base noise seed (default: %(default)s)")
    parser.add_argument(
        "--format",
        default="wav",
        choices=("wav", "flac", "mp3", "m4a"),
        help="file type of each chapter when the output is a directory (default: %(default)s)",
    )
    parser.add_argument("--subtitles", action="store_true", help="also write each chapter's word timings as .srt")
    parser.add_argument(
        "--ray", metavar="ADDRESS", help="run on a Ray cluster: its address (host:port) or auto (needs the ray extra)"
    )
    parser.add_argument(
        "--unit-chars",
        type=int,
        default=None,
        metavar="N",
        help="characters of whole paragraphs per unit of work: smaller spreads a chapter over "
        "more workers (default: 1500, ~100 s of speech)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="threads per process: here, or per Ray worker (default: every core here, 1 per Ray worker)",
    )
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: HF cache, else the offline rebuild)")
    parser.add_argument("--artifact", help="a compiled artifact directory (default: compile once and cache)")
    add_precision_argument(parser)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _check(args) -> None:
    from ..book.output import check_writable

    if not 0.1 <= args.speed <= 10:
        raise InvalidInputError(f"--speed must be between 0.1 and 10, got {args.speed}")
    if args.seed < 0:
        raise InvalidInputError(f"--seed must be 0 or more, got {args.seed}")
    if args.threads is not None and args.threads < 1:
        raise InvalidInputError(f"--threads must be at least 1, got {args.threads}")
    if args.unit_chars is not None and args.unit_chars < 1:
        raise InvalidInputError(f"--unit-chars must be at least 1, got {args.unit_chars}")
    if args.artifact and not Path(args.artifact).is_dir():
        raise InvalidInputError(f"--artifact {args.artifact}: no such directory")
    check_writable(args.output)


def _artifact(args) -> tuple[Path, dict]:
    """The artifact directory and the vocab (as `say` finds them)."""
    from ..assets import load_config

    if args.artifact:
        return Path(args.artifact), load_config()["vocab"]
    from ..artifact_cache import ensure_artifact
    from ..assets.weights import locate

    weights = locate(args.weights)
    return ensure_artifact(weights, precision=args.precision), weights.config["vocab"]


def run(args) -> int:
    from ..assets import load_voice, resolve_lang, voice_language
    from ..book.job import LocalExecutor, speak_book
    from ..book.output import write_book
    from ..book.plan import UNIT_CHARS
    from ..book.render import Voice
    from ..book.resume import ChapterStore, settings_key
    from ..book.sources import read_book

    executor = None
    try:
        # Everything the user can get wrong is checked before the slow steps.
        _check(args)
        book = read_book(args.input)
        pack = load_voice(args.voice)
        lang = resolve_lang(args.lang) if args.lang else voice_language(args.voice)
        if args.threads is not None and not args.ray:
            from ..runtime import set_num_threads

            set_num_threads(args.threads)  # before compiling: both pools start once
        artifact, vocab = _artifact(args)
        voice = Voice(pack, lang, args.speed, args.seed)
        unit_chars = args.unit_chars or UNIT_CHARS
        settings = settings_key(
            voice=hashlib.sha256(pack.tobytes()).hexdigest(),
            lang=lang,
            speed=args.speed,
            seed=args.seed,
            unit_chars=unit_chars,
            artifact=hashlib.sha256((artifact / "meta.json").read_bytes()).hexdigest(),
        )
        store = ChapterStore(Path(args.output).expanduser(), settings)
        if args.ray:
            from ..book.ray_backend import RayExecutor

            executor = RayExecutor(args.ray, str(artifact.resolve()), threads=args.threads or 1)
            sample_rate = int(json.loads((artifact / "meta.json").read_text())["sample_rate"])
        else:
            from ..runtime import KokoroTVM

            runtime = KokoroTVM(artifact)
            executor = LocalExecutor(runtime)
            sample_rate = runtime.sample_rate
        chapters = speak_book(
            book.chapters, executor, voice, vocab, sample_rate, store, quiet=args.quiet, unit_chars=unit_chars
        )
        spoken = [c for c in chapters if len(c.samples)]
        if not spoken:
            raise InvalidInputError(f"{args.input}: nothing to speak (no pronounceable text in {lang!r})")
        written = write_book(
            args.output, spoken, sample_rate, title=book.title, chapter_format=args.format, subtitles=args.subtitles
        )
        store.remove()  # the book is written: the kept chapters have done their job
    finally:  # errors become one line and an exit code in cli.main
        if executor is not None:
            executor.close()
    seconds = sum(len(c.samples) for c in spoken) / sample_rate
    print(
        f"wrote {args.output}: {len(spoken)} chapters, {seconds / 60:.1f} min of audio"
        f"{f' ({len(written)} files)' if len(written) > 1 else ''}",
        file=sys.stderr,
    )
    return 0
