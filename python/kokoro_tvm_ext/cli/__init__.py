"""The ``kokoro-tvm`` command line. Each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from contextlib import contextmanager

from kokoro_tvm_ext import __version__
from kokoro_tvm_ext.support.errors import KokoroError, KokoroWarning

# (name, module of kokoro_tvm_ext.cli, one line for `kokoro-tvm --help`). Each module defines add_arguments(parser)
# and run(args) -> int, and is imported only when its command runs or its help is asked for: `say` does not pay for
# the server's, the book's and the compiler's imports (~0.1 s of a cold `say`).
COMMANDS = [
    ("say", "say", "speak text to an audio file (WAV, FLAC, MP3, Opus, AAC)"),
    ("compile", "compile", "compile Kokoro into a deployable TVM artifact"),
    ("voices", "voices", "list the voices (--install unpacks all 54); voices design: a voice like a recording"),
    ("demo", "demo", "compile and run a small Relax program that calls the Rust plugin"),
    ("serve", "serve", "serve an OpenAI-compatible speech API (streaming, word timestamps)"),
    ("book", "book", "speak an EPUB, markdown or text book to an audiobook (resumable; --ray for a cluster)"),
    ("weights", "weights", "convert a Kokoro .pth checkpoint to .safetensors (which loads without torch)"),
    ("wyoming", "wyoming", "speak for Home Assistant over the Wyoming protocol (streamed, every voice)"),
    ("cache", "cache", "list the cache (compiled artifacts, voices, weights); --prune deletes old versions' entries"),
]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``only``: the one command whose arguments are added (the others are listed with
    their help line), as ``main`` builds it for the command it runs."""
    parser = argparse.ArgumentParser(
        prog="kokoro-tvm",
        description="Run Kokoro-82M text-to-speech on stock Apache TVM with the kokoro-tvm-ext plugin.",
        epilog='Start with: kokoro-tvm say "Hello from TVM." -o hello.wav   (see kokoro-tvm say --help)',
    )
    parser.add_argument("--version", action="version", version=f"kokoro-tvm-ext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name, summary in COMMANDS:
        p = sub.add_parser(name, help=summary, formatter_class=argparse.RawDescriptionHelpFormatter)
        if only is None or name == only:
            module = importlib.import_module(f"{__name__}.{module_name}")
            p.description = module.__doc__
            module.add_arguments(p)
            p.set_defaults(run=module.run)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. The one place errors become exit codes: what a user can cause
    (:class:`~kokoro_tvm_ext.support.errors.KokoroError`: its ``exit_code``, 2 for input and 3 for
    assets, artifacts and the CPU; an OSError: 1) prints one line; anything else is a bug
    and keeps its traceback."""
    parser = build_parser(only=_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        with _warnings_as_lines(args.command):
            return int(args.run(args) or 0)
    except KokoroError as err:
        print(f"kokoro-tvm {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:  # a path that cannot be read or written, a full disk
        print(f"kokoro-tvm {args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return _interrupted(args.command)
    except Exception as err:
        # A library's clean-up can fail while Ctrl-C unwinds it (torch.export's tracing context raised
        # KeyError from its `finally`): still an interrupt, not a bug of ours.
        if any(isinstance(e, KeyboardInterrupt) for e in _causes(err)):
            return _interrupted(args.command)
        raise


@contextmanager
def _warnings_as_lines(command: str):
    """Our warnings (:class:`KokoroWarning`: the text's language, dropped characters, a missing espeak-ng) as one
    line each, ``kokoro-tvm say: warning: ...``; other libraries' (jieba's and misaki's deprecations at import) are
    not the user's to act on and stay hidden unless asked for (``python -W``, ``$PYTHONWARNINGS``)."""
    with warnings.catch_warnings():
        if not sys.warnoptions:
            warnings.simplefilter("ignore")
        warnings.simplefilter("default", KokoroWarning)
        show_other = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, KokoroWarning):
                print(f"kokoro-tvm {command}: warning: {message}", file=sys.stderr, flush=True)
            else:
                show_other(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _interrupted(command: str) -> int:
    # Outputs are written all at once at the end, so none is left partly written (book, which
    # keeps its finished chapters for a rerun, says so itself).
    print(f"kokoro-tvm {command}: interrupted; no output was written", file=sys.stderr)
    return 130


def _causes(err: BaseException):
    """``err`` and the exceptions it was raised while handling, innermost last."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def console_main() -> None:
    """The installed ``kokoro-tvm`` command: ``main``, then exit without tearing the
    interpreter down. Every output is written and closed by then; what is left is
    freeing the G2P dictionaries, unmapping the weights and joining thread pools,
    ~0.1 s of a 2 s ``say`` that the operating system does faster at exit."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that hung up, a closed stream
            code = code or 1
    os._exit(code)
