"""Benchmark helpers: timing, thread pinning, machine description, table printing."""

from __future__ import annotations

import os
import platform
import statistics
import time


def median_seconds(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def machine_line(threads: int) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"machine: {cpu}, {os.cpu_count()} cores visible, {threads} threads used; python {platform.python_version()}"


def set_threads(threads: int) -> None:
    """Pin every runtime we compare to the same thread count (before they start pools)."""
    for var in ("TVM_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(threads)


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
