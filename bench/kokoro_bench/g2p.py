"""Planning time (G2P, chunking, tokens: ``Speaker.plan``) per 1,000 characters, every language, on normal and
hostile text at two lengths: the work a server does before any synthesis, which must stay linear in the input.

Planning needs no model, only its sample rate and token limit, so a stand-in takes the model's place. CPU time of
the planning thread, median of ``--repeat`` runs; a per-1,000-character figure that holds as the length grows is
linear work.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import warnings

from kokoro_bench.plans import planner
from kokoro_bench.table import machine_line, print_table

SENTENCES = {
    "a": "The quick brown fox jumps over the lazy dog, and then it sleeps. ",
    "b": "The colour of the harbour was grey, and the lorry was late. ",
    "e": "El perro corre por el parque, y luego duerme bajo el árbol. ",
    "f": "Le chat de la voisine dort au soleil, puis il mange sa soupe. ",
    "h": "मैं आज बाजार जा रहा हूँ, और फिर घर वापस आऊँगा। ",
    "i": "Il gatto dorme sul divano, e poi mangia la sua pappa. ",
    "j": "今日はとても良い天気ですね、散歩に行きましょう。",
    "p": "O gato dorme no sofá, e depois come a sua comida. ",
    "z": "今天天气很好，我们一起去公园散步吧。",
}


def _fill(text: str, n: int) -> str:
    return (text * (n // len(text) + 1))[:n]


def _random_unicode(n: int, rng: random.Random) -> str:
    """ASCII, any code point (surrogates left out: they are refused at once), combining marks, spaces, digits."""
    picks = (
        lambda: rng.randrange(0x20, 0x7F),
        lambda: rng.randrange(0, 0x110000),
        lambda: rng.randrange(0x300, 0x370),
        lambda: 0x20,
        lambda: rng.randrange(0x30, 0x3A),
    )
    chars = (chr(rng.choice(picks)()) for _ in range(n))
    return "".join(c for c in chars if not "\ud800" <= c <= "\udfff")


def texts(lang: str, n: int, rng: random.Random) -> dict[str, str]:
    base = _fill(SENTENCES[lang], n)
    return {
        "prose": base,
        "one number": base[: n // 2] + " 1234 " + base[n // 2 :],
        "emoji": "\U0001f600" * n,
        "random Unicode": _random_unicode(n, rng),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="1000,4000", help="text lengths in characters (default: %(default)s)")
    parser.add_argument("--langs", default="".join(SENTENCES), help="language codes (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell, the median is shown (default: 3)")
    args = parser.parse_args(argv)
    from kokoro_tvm_ext.errors import KokoroError
    from kokoro_tvm_ext.speech.speaker import Voice

    warnings.simplefilter("ignore")
    speaker = planner()
    lengths = [int(n) for n in args.lengths.split(",")]
    rows, worst = [], {}
    for lang in args.langs:
        voice = Voice.silent("silent", lang)
        speaker.plan(SENTENCES[lang], voice)  # load the language's G2P outside the timing
        for n in lengths:
            for kind, text in texts(lang, n, random.Random(0)).items():
                times, outcome = [], "plan"
                for _ in range(args.repeat):
                    start = time.thread_time()
                    try:
                        speaker.plan(text, voice)
                    except KokoroError as err:
                        outcome = type(err).__name__
                    times.append(time.thread_time() - start)
                per_1000 = statistics.median(times) * 1000 / len(text)
                if per_1000 > worst.get(kind, (0.0, ""))[0]:
                    worst[kind] = (per_1000, lang)
                rows.append([lang, kind, len(text), f"{per_1000:.3f}", outcome])
    print(machine_line(1))
    print_table(["lang", "text", "chars", "CPU s / 1,000 chars (median)", "result"], rows)
    print("worst per 1,000 characters: " + ", ".join(f"{k} {v:.3f} s ({lang})" for k, (v, lang) in worst.items()))
    return 0
