"""Speak a whole book: EPUB, markdown or text in, an audiobook with chapters out.

Chapters come from the EPUB's table of contents, markdown's top-level # headings, or
the heading-like lines of a text file. The output is a .m4b or .mp3 with chapter
markers, or a directory with one file per chapter (--format). Finished chapters are
kept in a work directory beside the output (.NAME.book/) until the book is written,
so an interrupted run picks up where it stopped; a changed chapter or setting is
spoken again. The book's files are written together at the end: an interrupted or
failed run leaves none of them. --ray spreads the work over a Ray cluster; the audio is sample-identical
to a single-process run (each chunk's noise seed comes from its position in the book). An EPUB's zip is
checked before any of it is read: one past a limit (a zip bomb) is refused in one line naming the
--max-book-* flag that raises it.

Examples:
  kokoro-tvm book novel.epub -o novel.m4b
  kokoro-tvm book essay.md -o essay.mp3 --voice bf_emma --subtitles
  kokoro-tvm book story.txt -o story/ --format flac
  kokoro-tvm book novel.epub -o novel.m4b --ray auto            # on the Ray cluster of this machine
  kokoro-tvm book novel.epub -o novel.m4b --ray 10.0.0.5:6379"""

from __future__ import annotations

import sys

from kokoro_tvm_ext.book.job import BookJob, check_markup
from kokoro_tvm_ext.book.output import BookOutput
from kokoro_tvm_ext.book.plan import UNIT_CHARS
from kokoro_tvm_ext.book.render import Reading
from kokoro_tvm_ext.book.sources import EpubLimits, read_book
from kokoro_tvm_ext.cli.options import (
    add_cast_arguments,
    add_model_arguments,
    add_voice_arguments,
    cast_aliases,
    check_voice_arguments,
    speaker_config,
)
from kokoro_tvm_ext.speech import Voice
from kokoro_tvm_ext.speech.markup import resolve_voice
from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE
from kokoro_tvm_ext.support.errors import InvalidInputError


def add_arguments(parser) -> None:
    parser.add_argument("input", help="the book: .epub, .md or .txt")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        help="a .m4b or .mp3 file (with chapter markers), or a directory for one file per chapter",
    )
    add_voice_arguments(parser, DEFAULT_VOICE)
    add_cast_arguments(parser)
    parser.add_argument(
        "--dialogue-voice",
        metavar="VOICE",
        help='read quoted speech (“…”, „…“, «…», 「…」, ‘…’, "…") in this voice, the narration in --voice',
    )
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
        f"more workers (default: {UNIT_CHARS}, ~100 s of speech)",
    )
    # An EPUB is a zip: what it may hold, checked before any of it is read (a zip bomb is refused in one line).
    limits = EpubLimits()
    parser.add_argument(
        "--max-book-bytes",
        type=int,
        default=limits.max_bytes,
        metavar="N",
        help="an EPUB's files uncompressed, in all, and the EPUB itself: at most N bytes (default: %(default)s = "
        "256 MiB)",
    )
    parser.add_argument(
        "--max-book-entries",
        type=int,
        default=limits.max_entries,
        metavar="N",
        help="at most N files in an EPUB (default: %(default)s)",
    )
    parser.add_argument(
        "--max-book-ratio",
        type=float,
        default=limits.max_ratio,
        metavar="R",
        help="an EPUB's file of over 1 MiB expands at most R times (a zip bomb: ~1000) (default: %(default)g)",
    )
    parser.add_argument(
        "--max-book-text-bytes",
        type=int,
        default=limits.max_text_bytes,
        metavar="N",
        help="an EPUB's XHTML and XML (chapters, tables of contents, package), in all: at most N bytes, "
        "which take up to ~30 times their size in memory while parsed (default: %(default)s = 16 MiB)",
    )
    add_model_arguments(parser, threads_help="threads per process: here, or per Ray worker (1 per Ray worker)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _check(args):
    """Everything the user can get wrong that is cheap to check: the book's output and the Speaker's config."""

    check_voice_arguments(args)
    config = speaker_config(args)
    if args.unit_chars is not None and args.unit_chars < 1:
        raise InvalidInputError(f"--unit-chars must be at least 1, got {args.unit_chars}")
    sizes = {
        "--max-book-bytes": args.max_book_bytes,
        "--max-book-entries": args.max_book_entries,
        "--max-book-text-bytes": args.max_book_text_bytes,
    }
    for flag, value in sizes.items():
        if value < 1:
            raise InvalidInputError(f"{flag} must be at least 1, got {value}")
    if not args.max_book_ratio >= 1:  # NaN too
        raise InvalidInputError(f"--max-book-ratio must be at least 1, got {args.max_book_ratio:g}")
    output = BookOutput(args.output, args.format, args.subtitles)
    output.check()
    return output, config


def run(args) -> int:

    # Everything the user can get wrong is checked before the slow steps; errors become one
    # line and an exit code in cli.main.
    output, config = _check(args)
    limits = EpubLimits(args.max_book_bytes, args.max_book_entries, args.max_book_ratio, args.max_book_text_bytes)
    book = read_book(args.input, limits)
    voice = Voice.load(args.voice, args.lang)
    aliases = cast_aliases(args) if args.cast or args.voice_alias else None  # a book's key keeps without them
    if args.dialogue_voice:
        Voice.load(resolve_voice(args.dialogue_voice, aliases, "--dialogue-voice")[0])  # before anything slow
    check_markup(book, Reading(voice, args.speed, args.seed, None, aliases, args.dialogue_voice))
    job = BookJob.prepare(
        config,
        voice,
        output,
        speed=args.speed,
        seed=args.seed,
        unit_chars=args.unit_chars,
        ray=args.ray,
        aliases=aliases,
        dialogue_voice=args.dialogue_voice,
    )
    try:
        spoken, written, sample_rate = job.run(book, output, quiet=args.quiet)
    except KeyboardInterrupt:
        kept = job.store.kept(book.chapters)
        where = (
            f"; {kept} of {len(book.chapters)} chapters are kept in {job.store.dir}: run the same command again to "
            "go on"
        )
        print(
            f"kokoro-tvm book: interrupted; no file of the book was written to {args.output}{where if kept else ''}",
            file=sys.stderr,
        )
        return 130
    seconds = sum(len(c.samples) for c in spoken) / sample_rate
    print(
        f"wrote {args.output}: {len(spoken)} chapters, {seconds / 60:.1f} min of audio"
        f"{f' ({len(written)} files)' if len(written) > 1 else ''}",
        file=sys.stderr,
    )
    return 0
