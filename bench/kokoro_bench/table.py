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
    """The CPU (name, family/model, the vector extensions our kernels and the peers pick from) and threads."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields:
        cpu += f" (family {fields['cpu family']} model {fields.get('model', '?')})"
    flags = set(fields.get("flags", "").split())
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile") if f in flags]
    return (
        f"machine: {cpu}, {' '.join(isa) or 'no AVX2'}; {os.cpu_count()} cores visible, {threads} threads used; "
        f"python {platform.python_version()}"
    )


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
