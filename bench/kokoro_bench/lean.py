"""The lean runtime: how fast `kokoro-tvm say` starts, and how much memory synthesis needs.

Two measurements, one run:

1. Cold `kokoro-tvm say SENTENCE -o x.wav` (--sentence, default a short English one) with the
   artifact already compiled and cached: wall and CPU time of the real command in a new process,
   median of --repeat (after one untimed run, so the artifact exists, the files are in the page
   cache and Python's bytecode caches are written, as on any later run; the runs may write bytecode
   even where PYTHONDONTWRITEBYTECODE is set, which would otherwise compile every module on every run
   and add ~1 s that an installed package never pays). Then the same steps timed one by one inside a new
   process (the breakdown), in cli/say.py's order: Python and package imports,
   loading the voice, finding the cached artifact, loading the Speaker (TVM's
   runtime and the weights), and ``Speaker.speak`` in its two halves: planning
   (G2P, chunks, tokens) and running the model; then writing the WAV.
2. Peak RSS (VmHWM) of synthesizing the 48- and 309-token benchmark texts, each
   system in a fresh process that gets the text's phonemes, tokens and style only
   (e2e.py's rows): our artifact speaking through ``Speaker`` with torch blocked from
   import (as deployed), and ONNX Runtime on the int8 export.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kokoro_bench.workers import in_subprocess, job_main

SENTENCE = "Hello from TVM, running Kokoro on a plain CPU."
STEPS = ("imports", "load voice", "find artifact", "load Speaker", "G2P (plan)", "synthesis (run)", "write WAV")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=2, help="threads for every run (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="cold runs to take the median of (default: 5)")
    parser.add_argument("--skip-memory", action="store_true", help="only the cold-start part")
    parser.add_argument("--sentence", default=SENTENCE, help=f"the text to say (default: {SENTENCE!r})")


def say_steps(output: str, sentence: str = SENTENCE) -> dict:
    """`kokoro-tvm say sentence -o output` on the default voice and weights, step by step
    (the calls cli/say.py makes; ``speak`` is ``join(run(plan(...)))``, timed as its plan and its
    run); seconds per step. Runs in a fresh process."""
    t0 = time.perf_counter()
    from kokoro_tvm_ext.cli import build_parser
    from kokoro_tvm_ext.speech import Speaker, Voice, join
    from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

    build_parser()
    t1 = time.perf_counter()
    voice = Voice.load(DEFAULT_VOICE)
    t2 = time.perf_counter()
    from kokoro_tvm_ext.model.artifact_cache import ensure_artifact

    artifact = ensure_artifact()
    t3 = time.perf_counter()
    speaker = Speaker.load(artifact)
    t4 = time.perf_counter()
    plan = speaker.plan(sentence, voice, speed=1.0, seed=0)
    t5 = time.perf_counter()
    speech = join(list(speaker.run(plan)), speaker.sample_rate)
    t6 = time.perf_counter()
    import io

    import soundfile as sf

    from kokoro_tvm_ext.support.cache import atomic_write

    wav = io.BytesIO()
    sf.write(wav, speech.audio, speech.sample_rate, format="WAV", subtype="PCM_16")
    with atomic_write(Path(output)) as f:
        f.write(wav.getvalue())
    t7 = time.perf_counter()
    marks = [t0, t1, t2, t3, t4, t5, t6, t7]
    result = {step: marks[i + 1] - marks[i] for i, step in enumerate(STEPS)}
    result["audio_seconds"] = speech.seconds
    result["torch_imported"] = "torch" in sys.modules and sys.modules["torch"] is not None
    return result


def worker(job: dict) -> dict:
    return say_steps(job["output"], job["sentence"])


def prepare(job: dict) -> dict:
    return {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cold_say(sentence: str, repeat: int, threads: int, tmp: Path) -> tuple[list[float], list[float], list[dict]]:
    """Wall and CPU seconds (user + system, all threads) of each cold run, and the step breakdowns."""
    cmd = [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", sentence, "-o", str(tmp / "x.wav")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TVM_NUM_THREADS"] = str(threads)
    subprocess.run(cmd, check=True, env=env, capture_output=True)  # compiles if needed, fills the caches
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), _children_cpu()
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        walls.append(time.perf_counter() - start)
        cpus.append(_children_cpu() - cpu)
    job = {"system": "tvm", "output": str(tmp / "y.wav"), "sentence": sentence}
    steps = [in_subprocess(__name__, "worker", job, threads, block_torch=False) for _ in range(repeat)]
    return walls, cpus, steps


def _memory_rows(threads: int, tmp: Path) -> list[dict]:
    from kokoro_bench import e2e
    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

    weights = find_weights()
    rows = []
    inputs = {}
    for key, text in e2e.TEXTS.items():
        inputs[key] = tmp / f"{key}.npz"
        e2e.write_inputs(text, DEFAULT_VOICE, weights, inputs[key])
    for system in ("tvm", "ort-int8"):
        ready = in_subprocess(e2e.__name__, "prepare", {"system": system, "weights": None}, threads, block_torch=False)
        for key in e2e.TEXTS:
            job = {**ready, "system": system, "inputs": str(inputs[key]), "repeat": 1, "threads": threads}
            rows.append(in_subprocess(e2e.__name__, "worker", job, threads, block_torch=system == "tvm"))
    return rows


def run(args) -> int:
    from kokoro_bench.table import machine_line, print_table

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        walls, cpus, steps = _cold_say(args.sentence, args.repeat, args.threads, tmp)
        rows = [] if args.skip_memory else _memory_rows(args.threads, tmp)
    print(machine_line(args.threads))
    print(
        f'\ncold `kokoro-tvm say "{args.sentence}" -o x.wav`, artifact cached, median of {args.repeat}: '
        f"{statistics.median(walls):.2f} s wall (runs: {', '.join(f'{w:.2f}' for w in walls)}), "
        f"{statistics.median(cpus):.2f} s CPU (user + system, all threads); "
        f"{steps[0]['audio_seconds']:.2f} s of audio; torch imported: {steps[0]['torch_imported']}"
    )
    print_table(
        ["step", "median s"],
        [[s, f"{statistics.median(r[s] for r in steps):.3f}"] for s in STEPS]
        + [["total (in-process)", f"{statistics.median(sum(r[s] for s in STEPS) for r in steps):.3f}"]],
    )
    if rows:
        print("\npeak RSS of one synthesis, each in a fresh process (tvm with torch blocked):")
        print_table(
            ["system", "tokens", "peak RSS MB", "seconds", "audio s"],
            [
                [
                    r["system"],
                    r["tokens"],
                    f"{r['peak_rss_mb']:.0f}",
                    f"{r['seconds']:.3f}",
                    f"{r['audio_seconds']:.2f}",
                ]
                for r in rows
            ],
        )
    print("\nJSON " + json.dumps({"say_wall": walls, "say_cpu": cpus, "steps": steps, "memory": rows}))
    return 0


def main(argv: list[str] | None = None) -> int:
    return job_main(__doc__, add_arguments, prepare, worker, run, argv)


if __name__ == "__main__":
    sys.exit(main())
