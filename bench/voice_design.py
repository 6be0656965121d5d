"""`kokoro-tvm voices design` measured: hold stock voices out, design each from its own speech, judge the result.

For each held-out voice V (default: the issue's five, both genders, two languages):
  1. V speaks a recording (RECORDING text, noise seed 1; never one of the search's test sentences);
  2. `design` searches from the other 53 stock voices, once with CMA-ES and once with the random walk, at the same
     budget (--steps candidates, or --minutes each);
  3. each result, the nearest remaining stock voice (by the encoder, as the search's start ranks them) and the
     search's start (the anchors' mean) are judged on the EVALUATION sentences (never spoken during a search):
     speaker-encoder similarity to V speaking them, style cosine to V's true pack, and the recognizer's word error
     rate (faster-whisper base, the recognizer extra), next to V's own.

A person's recording (``--recording FILE``, American English; e.g. the public-domain one of tests/public_speech.py,
whose path ``python tests/public_speech.py`` prints) is designed from every stock voice the same way and judged by
similarity to the recording's own embedding (there is no true pack) and the recognizer.

Usage: python bench/voice_design.py [--voices af_heart am_adam ...] [--recording FILE] [--steps 240 | --minutes 10]
                                    [--json out.json]
The issue's full measurement: --minutes 10 (five voices x two methods x 10 min: ~2 h on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
from kokoro_bench.table import machine_line, print_table

VOICES = ("af_heart", "am_adam", "bf_emma", "bm_george", "ff_siwis")
RECORDING = {
    "a": "Every morning I walk along the river and watch the boats go by. The air is fresh and the water calm.",
    "f": "Chaque matin, je marche le long de la rivière et je regarde passer les bateaux. L'air est frais.",
}
EVALUATION = {
    "a": (
        "A gentle breeze moved through the open window of the old library.",
        "Please remember to bring your umbrella, since it might rain later.",
        "The museum opens at nine and closes early on Sundays.",
    ),
    "f": (
        "Une brise légère traversait la fenêtre ouverte de la vieille bibliothèque.",
        "N'oubliez pas votre parapluie, il pourrait pleuvoir plus tard.",
        "Le musée ouvre le matin et ferme tôt le dimanche.",
    ),
}
WHISPER = {"a": "en", "b": "en", "f": "fr"}


def _texts(lang: str) -> str:
    """Which language's sentences a voice of ``lang`` speaks (British English speaks the American lines)."""
    return "a" if lang in ("a", "b") else lang


def _judge(ctx: dict, name: str, pack, seconds, candidates) -> dict:
    from kokoro_harness.fidelity import word_error_rate

    from kokoro_tvm_ext.speech.speaker import Voice
    from kokoro_tvm_ext.speech.voice_design.scoring import unit
    from kokoro_tvm_ext.speech.voice_design.space import style_cosine

    speaker, sentences, transcribe = ctx["speaker"], ctx["sentences"], ctx["transcribe"]
    voice = Voice(name, pack, ctx["lang"])
    clips = [speaker.speak(t, voice, seed=0).audio for t in sentences]
    sims = [float(unit(e) @ ctx["reference"]) for e in ctx["encoder"].embed_many(clips, speaker.sample_rate)]
    wer = None
    if transcribe is not None:
        heard = [transcribe(c, WHISPER[ctx["lang"]]) for c in clips]
        wer = float(np.mean([word_error_rate(h, t) for h, t in zip(heard, sentences)]))
    return {
        "held_out": ctx["held"],
        "voice": name,
        "similarity": round(float(np.mean(sims)), 4),
        "style_cosine": None if ctx["truth_pack"] is None else round(style_cosine(pack, ctx["truth_pack"]), 4),
        "wer": None if wer is None else round(wer, 4),
        "seconds": None if seconds is None else round(seconds, 1),
        "candidates": candidates,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--voices", nargs="*", default=list(VOICES), help="held-out stock voices (none: --recording only)"
    )
    parser.add_argument("--recording", type=Path, help="also design from this person's recording (American English)")
    parser.add_argument("--steps", type=int, help="candidates per design (default: --minutes)")
    parser.add_argument("--minutes", type=float, help="minutes per design (default: 10 without --steps)")
    parser.add_argument("--population", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", default=["cma", "walk"])
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)

    from kokoro_harness.fidelity import transcriber

    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig
    from kokoro_tvm_ext.speech.voice_design import DesignOptions, default_precision, design
    from kokoro_tvm_ext.speech.voice_design.scoring import unit
    from kokoro_tvm_ext.speech.voices import list_voices, load_voice

    precision = default_precision()
    speaker = Speaker.open(SpeakerConfig(precision=precision), quiet=True)
    encoder = SpeakerEncoder.load()
    transcribe = transcriber(threads=2)
    stock = [v.name for v in list_voices() if v.source != "voices-dir"]
    rows = []
    work = Path(tempfile.mkdtemp(prefix="voice-design-bench."))
    print(machine_line(os.cpu_count()))
    print(f"precision {precision}; budget {args.steps or ''} steps {args.minutes or ''} min; work in {work}")
    targets = list(args.voices) + ([args.recording] if args.recording else [])
    for held in targets:
        lang = "a" if isinstance(held, Path) else held[0]
        sentences = EVALUATION[_texts(lang)]
        if isinstance(held, Path):  # a person: judged against the recording itself
            recording, truth_pack = held, None
            wav, rate = sf.read(str(held), dtype="float32")
            reference = unit(encoder.embed(wav, rate))
            held = held.name
        else:  # a stock voice held out: judged against its own speech of the evaluation sentences
            recording = work / f"{held}.wav"
            speech = speaker.speak(RECORDING[_texts(lang)], held, seed=1)
            sf.write(recording, speech.audio, speech.sample_rate, subtype="PCM_16")
            truth_pack = load_voice(held)
            truth = [speaker.speak(t, held, seed=0).audio for t in sentences]
            reference = unit(np.mean([unit(e) for e in encoder.embed_many(truth, speaker.sample_rate)], axis=0))

        ctx = {
            "held": held,
            "lang": lang,
            "sentences": sentences,
            "reference": reference,
            "truth_pack": truth_pack,
            "speaker": speaker,
            "encoder": encoder,
            "transcribe": transcribe,
        }

        def judge(name, pack, seconds=None, candidates=None, ctx=ctx):
            rows.append(_judge(ctx, name, pack, seconds, candidates))
            print(json.dumps(rows[-1]), flush=True)

        if truth_pack is not None:
            judge(f"{held} itself", truth_pack)
        pool = tuple(n for n in stock if n != held)
        start_done = False
        for method in args.methods:
            options = DesignOptions(
                lang=lang,
                seed=args.seed,
                steps=args.steps,
                minutes=args.minutes,
                method=method,
                population=args.population,
                pool=pool,
            )
            began = time.perf_counter()
            result = design([recording], work / f"{held}-{method}.npy", options, speaker=speaker, encoder=encoder)
            seconds = time.perf_counter() - began
            if not start_done:
                start_done = True
                ranked = sorted(result.state.stock, key=lambda n: -result.state.stock[n])
                judge(f"nearest stock ({ranked[0]})", load_voice(ranked[0]))
                judge("start (anchors' mean)", np.mean([load_voice(n) for n in result.state.anchors], axis=0))
            judge(f"designed ({method})", result.pack, seconds, result.state.evaluations)
    print()
    keys = ("held_out", "voice", "similarity", "style_cosine", "wer", "seconds", "candidates")
    print_table(
        ["held out", "voice", "similarity (unseen sentences)", "style cosine", "WER", "search s", "candidates"],
        [["" if r[k] is None else r[k] for k in keys] for r in rows],
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
