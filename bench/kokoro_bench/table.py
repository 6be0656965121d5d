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


# The vector extensions our kernels and the peers choose between at run time (AMX: Sapphire Rapids and later).
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


def cpu_facts(cpuinfo: str) -> dict:
    """The first CPU's fields of a /proc/cpuinfo text: ``name``, ``family``, ``model`` (None where absent)
    and the ISA flags of ``ISA_FLAGS`` it has (``flags``) and lacks (``absent``), in ``ISA_FLAGS``' order."""
    fields = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    return {
        "name": fields.get("model name"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "flags": [f for f in ISA_FLAGS if f in flags],
        "absent": [f for f in ISA_FLAGS if f not in flags],
    }


def machine_line(threads, cpuinfo: str | None = None) -> str:
    """The CPU (name, family/model, which of ``ISA_FLAGS`` it has and lacks), the thread counts used
    (an int, or several: each row ran at each) and Python; ``cpuinfo`` defaults to this machine's."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:  # not Linux: the name only
            cpuinfo = ""
    facts = cpu_facts(cpuinfo)
    cpu = facts["name"] or platform.processor() or platform.machine()
    if facts["family"] is not None:
        cpu += f" (family {facts['family']} model {facts['model'] or '?'})"
    counts = sorted({threads} if isinstance(threads, int) else set(threads))
    used = " and ".join(map(str, counts)) + (" thread" if counts == [1] else " threads")
    return (
        f"machine: {cpu}; flags: {' '.join(facts['flags']) or 'none of ' + ' '.join(ISA_FLAGS)}"
        + (f" (no {' '.join(facts['absent'])})" if facts["flags"] and facts["absent"] else "")
        + f"; {os.cpu_count()} cores visible, {used} used; python {platform.python_version()}"
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
