"""The lean runtime: how fast `kokoro-tvm say` starts, and how much memory synthesis needs.

Two measurements, one run:

1. Cold `kokoro-tvm say "Hello." -o x.wav` with the artifact already compiled and
   cached: wall time of the real command in a new process, median of --repeat
   (after one untimed run, so the artifact exists and the files are in the page
   cache, as on any later run). Then the same steps timed one by one inside a new
   process (the breakdown): Python and package imports, finding the cached
   artifact, G2P, loading the artifact (TVM's runtime and the weights), synthesis,
   writing the WAV.
2. Peak RSS (VmHWM) of synthesizing the 48- and 309-token benchmark texts, each
   system in a fresh process that gets tokens and style only: our artifact with
   torch blocked from import (as deployed), and ONNX Runtime on the int8 export.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .workers import in_subprocess, job_main

SENTENCE = "Hello."
STEPS = ("imports", "find artifact", "G2P", "load artifact", "synthesis", "write WAV")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=2, help="threads for every run (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="cold runs to take the median of (default: 5)")
    parser.add_argument("--skip-memory", action="store_true", help="only the cold-start part")


def say_steps(output: str) -> dict:
    """`kokoro-tvm say SENTENCE -o output` on the default voice and weights, step by step
    (the same calls as cli/say.py); seconds per step. Runs in a fresh process."""
    t0 = time.perf_counter()
    import numpy as np

    from kokoro_tvm_ext.assets import chunk_text, load_voice, voice_language
    from kokoro_tvm_ext.assets.voices import DEFAULT_VOICE
    from kokoro_tvm_ext.cli import build_parser, say

    build_parser()
    t1 = time.perf_counter()
    from kokoro_tvm_ext.artifact_cache import ensure_artifact
    from kokoro_tvm_ext.assets.weights import locate

    weights = locate(None)
    artifact = ensure_artifact(weights)
    t2 = time.perf_counter()
    pack = load_voice(DEFAULT_VOICE)
    vocab = weights.config["vocab"]
    chunks = chunk_text(SENTENCE, vocab, lang=voice_language(DEFAULT_VOICE))
    t3 = time.perf_counter()
    from kokoro_tvm_ext.runtime import KokoroTVM

    runtime = KokoroTVM(artifact)
    t4 = time.perf_counter()
    audio = say.synthesize_chunks(runtime, chunks, pack, vocab, 1.0, 0)
    t5 = time.perf_counter()
    say._write_wav(output, audio, runtime.sample_rate)
    t6 = time.perf_counter()
    marks = [t0, t1, t2, t3, t4, t5, t6]
    result = {step: marks[i + 1] - marks[i] for i, step in enumerate(STEPS)}
    result["audio_seconds"] = float(np.asarray(audio).size / runtime.sample_rate)
    result["torch_imported"] = "torch" in sys.modules and sys.modules["torch"] is not None
    return result


def worker(job: dict) -> dict:
    return say_steps(job["output"])


def prepare(job: dict) -> dict:
    return {}


def _cold_say(repeat: int, threads: int, tmp: Path) -> tuple[list[float], list[dict]]:
    cmd = [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", SENTENCE, "-o", str(tmp / "x.wav")]
    env = {**os.environ, "TVM_NUM_THREADS": str(threads)}
    subprocess.run(cmd, check=True, env=env, capture_output=True)  # compiles if needed, fills the page cache
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        walls.append(time.perf_counter() - start)
    steps = [
        in_subprocess(__name__, "worker", {"output": str(tmp / "y.wav")}, threads, block_torch=False)
        for _ in range(repeat)
    ]
    return walls, steps


def _memory_rows(threads: int, tmp: Path) -> list[dict]:
    from kokoro_tvm_ext.assets import resolve
    from kokoro_tvm_ext.assets.voices import DEFAULT_VOICE

    from . import e2e

    weights = resolve(None)
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
    from .table import machine_line, print_table

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        walls, steps = _cold_say(args.repeat, args.threads, tmp)
        rows = [] if args.skip_memory else _memory_rows(args.threads, tmp)
    print(machine_line(args.threads))
    print(
        f'\ncold `kokoro-tvm say "{SENTENCE}" -o x.wav`, artifact cached, median of {args.repeat}: '
        f"{statistics.median(walls):.2f} s wall (runs: {', '.join(f'{w:.2f}' for w in walls)}); "
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
    print("\nJSON " + json.dumps({"say_wall": walls, "steps": steps, "memory": rows}))
    return 0


def main(argv: list[str] | None = None) -> int:
    return job_main(__doc__, add_arguments, prepare, worker, run, argv)


if __name__ == "__main__":
    sys.exit(main())
