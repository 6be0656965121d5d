"""The audio stage's cost per frame against its frame count: how much batching requests' audio stages could save.

A batch of B items of F frames does the audio stage's work on B·F frames. Where one item of B·F frames costs
less per frame than one of F frames, batching saves that difference; where the cost per frame is flat, the
cores are already busy and batching saves nothing. For each artifact of ``--precisions`` (the cached one,
compiled first if missing), the compiled audio stage runs on random aligned features of each frame count
(its cost does not depend on the values), interleaved count by count and round by round. The table gives the
median milliseconds, the microseconds per frame, and the saving per frame against the longest count: the most
a batch that long could save over items of this count. 80 frames are 2 s of audio, a short sentence.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from kokoro_bench.table import machine_line, print_table

FRAMES = (40, 80, 160, 320, 640, 1280)


def _frame_count(text: str) -> int:
    frames = int(text)
    if frames < 2:  # the audio stage's least frame count
        raise argparse.ArgumentTypeError(f"a frame count must be at least 2, got {frames}")
    return frames


def _inputs(model, frames: int, rng):
    import numpy as np

    from kokoro_tvm_ext.model.runtime.noise import make_noise

    noise = make_noise(frames, 0, harmonics=model.meta["harmonics"], samples_per_frame=model.meta["samples_per_frame"])
    en = rng.standard_normal((1, 640, frames), dtype=np.float32)
    asr = rng.standard_normal((1, 512, frames), dtype=np.float32)
    style = (0.3 * rng.standard_normal((1, 256))).astype(np.float32)
    return en, asr, style, noise["phase_noise"], noise["sine_noise"]


def run(args) -> int:
    import numpy as np

    from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
    from kokoro_tvm_ext.model.runtime import KokoroTVM, set_num_threads
    from kokoro_tvm_ext.model.weights import find_weights

    set_num_threads(args.threads)
    weights = find_weights()
    # Every artifact before any is loaded: a compile needs TVM's compiler, and a loaded artifact has
    # imported TVM's runtime alone.
    artifacts = {}
    for precision in args.precisions:
        print(f"the {precision} artifact (compiled first if the cache has none) ...", file=sys.stderr)
        artifacts[precision] = ensure_artifact(weights, precision=precision)
    models = {precision: KokoroTVM(artifact) for precision, artifact in artifacts.items()}
    rng = np.random.default_rng(0)
    inputs = {f: _inputs(next(iter(models.values())), f, rng) for f in args.frames}
    times = {(p, f): [] for p in models for f in args.frames}
    for model in models.values():  # warm-up: every shape once
        for f in args.frames:
            model._run("audio_stage", *inputs[f])
    for r in range(args.repeat):
        for f in args.frames:
            for p, model in models.items():
                start = time.perf_counter()
                model._run("audio_stage", *inputs[f])
                times[p, f].append(time.perf_counter() - start)
        print(f"  round {r + 1}/{args.repeat} done", file=sys.stderr)
    rows = []
    longest = max(args.frames)
    for p in models:
        per_frame_longest = statistics.median(times[p, longest]) / longest
        for f in args.frames:
            seconds = statistics.median(times[p, f])
            rows.append(
                [
                    p,
                    f,
                    f"{f * models[p].meta['samples_per_frame'] / models[p].sample_rate:.1f}",
                    f"{seconds * 1000:.0f}",
                    f"{seconds / f * 1e6:.0f}",
                    f"{(1 - per_frame_longest / (seconds / f)) * 100:.0f}%",
                ]
            )
    print(machine_line(args.threads) + f"; medians of {args.repeat}, interleaved")
    print_table(
        [
            "precision",
            "frames",
            "audio s",
            "audio stage ms",
            "us per frame",
            f"saved per frame by a batch of {longest} frames",
        ],
        rows,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="threads (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds, medians reported (default: 5)")
    parser.add_argument(
        "--frames",
        nargs="+",
        type=_frame_count,
        default=list(FRAMES),
        help=f"frame counts (default: {' '.join(map(str, FRAMES))})",
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["fp32"],
        choices=["fp32", "int8"],
        help="artifacts to measure (default: fp32)",
    )
    return run(parser.parse_args(argv))
