"""`kokoro-tvm book` throughput: one process vs a two-node local Ray cluster, and a projection to N machines.

Speaks a public-domain text (``bench/data/poe-tales.txt``) through the book driver twice: in
this process (``--threads`` threads, default every core), and on a Ray cluster of two nodes
started here with ``ray start`` (one CPU each, one thread per worker). Reports wall time and
audio seconds per wall second, the median compute per unit, and the projection
``T(N) = startup + ceil(units / N) * (unit compute + per-unit overhead)`` for N one-worker
machines, with startup and overhead measured on the cluster run. On one 2-core machine the
cluster shares the same two cores, so expect overhead, not speedup.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from kokoro_bench.table import machine_line, print_table

DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "poe-tales.txt"  # bench/data/


class _Timed:
    """Wraps an executor: when each unit arrived (from the start) and how long it took where it ran."""

    def __init__(self, inner):
        self.inner, self.arrivals, self.compute = inner, [], []

    def run(self, units, reading):
        start = time.perf_counter()
        for result in self.inner.run(units, reading):
            self.arrivals.append(time.perf_counter() - start)
            self.compute.append(result.seconds)
            yield result


def _speak(chapters, executor, reading, sample_rate, unit_chars):
    from kokoro_tvm_ext.book.job import speak_book
    from kokoro_tvm_ext.book.resume import ChapterStore

    timed = _Timed(executor)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        audio = speak_book(
            chapters,
            timed,
            reading,
            sample_rate,
            ChapterStore(Path(tmp) / "b.m4b", "bench"),
            quiet=True,
            unit_chars=unit_chars,
        )
        wall = time.perf_counter() - start
    return audio, wall, timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", help="a compiled real-weights artifact (default: the cached one, compiling it)")
    parser.add_argument("--text", default=str(DEFAULT_TEXT), help="the book (default: %(default)s)")
    parser.add_argument("--chapters", type=int, help="speak only the first N chapters")
    parser.add_argument("--voice", default="af_heart")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads of the one-process run")
    parser.add_argument("--unit-chars", type=int, default=1500)
    parser.add_argument("--skip-ray", action="store_true", help="only the one-process run")
    args = parser.parse_args(argv)

    from kokoro_tvm_ext.book.job import LocalExecutor
    from kokoro_tvm_ext.book.plan import chapter_units
    from kokoro_tvm_ext.book.render import Reading
    from kokoro_tvm_ext.book.sources import read_book
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig, Voice

    config = SpeakerConfig(artifact=args.artifact, threads=args.threads).resolved()
    chapters = read_book(args.text).chapters[: args.chapters]
    units = [u for i, c in enumerate(chapters) for u in chapter_units(c, i, args.unit_chars)]
    reading = Reading(Voice.load(args.voice), speed=1.0, seed=0)
    print(
        f"book: {args.text}: {len(chapters)} chapters, {sum(len(c.text) for c in chapters)} chars, "
        f"{len(units)} units of <= {args.unit_chars} chars",
        file=sys.stderr,
    )

    speaker = Speaker.open(config)
    rate = speaker.sample_rate
    audio, wall, timed = _speak(chapters, LocalExecutor(speaker), reading, rate, args.unit_chars)
    seconds = sum(len(c.samples) for c in audio) / rate
    unit_cost = statistics.median(timed.compute)
    rows = [
        [
            f"1 process, {args.threads} threads",
            len(units),
            f"{seconds:.0f}",
            f"{wall:.1f}",
            f"{seconds / wall:.2f}",
            f"{unit_cost:.2f}",
        ]
    ]
    print(f"one process: {wall:.1f} s for {seconds:.0f} s of audio", file=sys.stderr)
    projection = []
    if not args.skip_ray:
        from kokoro_harness.local_ray import local_cluster

        from kokoro_tvm_ext.book.ray_backend import RayExecutor

        with local_cluster(tempfile.mkdtemp(prefix="raybench-"), object_store_mb=200) as address:
            executor = RayExecutor(address, replace(config, threads=1))
            try:
                ray_audio, ray_wall, ray_timed = _speak(chapters, executor, reading, rate, args.unit_chars)
            finally:
                executor.close()
        same = all((a.samples.shape == b.samples.shape) for a, b in zip(ray_audio, audio))
        slots = 2
        ray_cost = statistics.median(ray_timed.compute)  # one unit on one worker thread
        # Startup: connecting, shipping the job, each worker loading the artifact and G2P;
        # overhead: what each unit costs beyond its compute once running (scheduling, transfer).
        startup = max(0.0, ray_timed.arrivals[0] - ray_timed.compute[0])
        per_unit = max(0.0, (ray_wall - startup) * slots / len(units) - statistics.mean(ray_timed.compute))
        rows.append(
            [
                "Ray, 2 nodes x 1 CPU, 1 thread each",
                len(units),
                f"{seconds:.0f}",
                f"{ray_wall:.1f}",
                f"{seconds / ray_wall:.2f}",
                f"{ray_cost:.2f}",
            ]
        )
        print(
            f"Ray: {ray_wall:.1f} s (first unit back after {ray_timed.arrivals[0]:.1f} s); same lengths: {same}",
            file=sys.stderr,
        )
        for n in (1, 2, 4, 8, 16, 32, 64):
            t = startup + math.ceil(len(units) / n) * (ray_cost + per_unit)
            projection.append([n, f"{t:.0f}", f"{seconds / t:.1f}"])
    print(machine_line(args.threads))
    print()
    print_table(["run", "units", "audio s", "wall s", "audio s / wall s", "median s / unit"], rows)
    if projection:
        print()
        print(
            f"projection, a one-thread worker per machine: startup {startup:.1f} s, per unit {ray_cost:.2f} s "
            f"compute + {per_unit:.2f} s overhead (measured above); {len(units)} units of {seconds / len(units):.0f} s"
        )
        print_table(["machines", "wall s", "audio s / wall s"], projection)
    return 0
