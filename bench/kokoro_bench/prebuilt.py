"""What compiling for this exact CPU gains over a prebuilt portable library (docs/performance.md).

Both artifacts (any artifact of each library: library-only or bound to other weights) get the default weights
bound to them, so only the compiled code differs; then the two are timed in turn on each bench text, ``--runs``
times after one untimed warm-up each, in one process (the same page cache, the same thread pool size). The
process's CPU seconds are printed beside the wall time: on a shared machine they move less with the load.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kokoro_bench.e2e import TEXTS
from kokoro_bench.plans import one_call


def bound_runtimes(libraries: dict[str, Path], work: Path) -> dict:
    """name -> KokoroTVM of that library with the default weights."""
    import kokoro_tvm_ext
    from kokoro_tvm_ext.model.binding import bind_checkpoint
    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.model.weights.files import read_checkpoint

    weights = find_weights()
    state = read_checkpoint(weights.ensure_file())
    return {
        name: kokoro_tvm_ext.KokoroTVM(bind_checkpoint(library, state, work / name, weights.fingerprint()))
        for name, library in libraries.items()
    }


def inputs(text: str):
    """(tokens, style row) of ``text`` in the default voice, as one call (the e2e bench's inputs)."""
    from kokoro_tvm_ext.speech import DEFAULT_VOICE

    chunk = one_call(text, DEFAULT_VOICE)
    return chunk.tokens, chunk.style


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native", type=Path, required=True, help="an artifact compiled for this CPU")
    parser.add_argument("--portable", type=Path, required=True, help="an artifact of a prebuilt level")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from kokoro_tvm_ext.model.runtime.artifact import read_meta

    libraries = {"native": args.native, "portable": args.portable}
    with tempfile.TemporaryDirectory() as work:
        runtimes = bound_runtimes(libraries, Path(work))
        seconds: dict = {(name, key): [] for name in runtimes for key in TEXTS}
        cpu: dict = {(name, key): [] for name in runtimes for key in TEXTS}
        audio_seconds = {}
        for key, text in TEXTS.items():
            tokens, style = inputs(text)
            for runtime in runtimes.values():  # warm-up
                audio, _ = runtime.synthesize(tokens, style)
            audio_seconds[key] = len(audio) / runtime.sample_rate
            for _ in range(args.runs):
                for name, runtime in runtimes.items():
                    started, cpu_started = time.perf_counter(), time.process_time()
                    runtime.synthesize(tokens, style)
                    seconds[name, key].append(time.perf_counter() - started)
                    cpu[name, key].append(time.process_time() - cpu_started)
    print(f"{'library':<32} {'text':<6} {'median s':>9} {'RTF':>7} {'CPU s':>7} {'CPU RTF':>8}  runs (s)")
    for (name, key), times in seconds.items():
        target = read_meta(libraries[name])["target"]
        label = f"{name} ({target.get('mcpu') if isinstance(target, dict) else target})"
        median, cpu_median = statistics.median(times), statistics.median(cpu[name, key])
        runs = " ".join(f"{t:.3f}" for t in times)
        audio = audio_seconds[key]
        print(
            f"{label:<32} {key:<6} {median:>9.3f} {median / audio:>7.4f} {cpu_median:>7.3f} {cpu_median / audio:>8.4f}"
            f"  {runs}"
        )
    return 0
