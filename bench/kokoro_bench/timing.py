"""The benchmarks' one timing rule: the median of repeated runs after untimed warm-ups."""

from __future__ import annotations

import time


def timed(fn, repeat: int, warmup: int = 1):
    """(median seconds of ``repeat`` runs after ``warmup`` untimed ones, the last result)."""
    for _ in range(warmup):
        fn()
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], out
