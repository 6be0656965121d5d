"""Benchmark workers: each system measured in a fresh Python process of its own.

A driver runs ``prepare`` (compile, convert: its memory must not count) and then
``worker`` (the timed loop) for each system through ``in_subprocess``; the child
runs the same module's ``main`` with ``--prepare JSON`` or ``--worker JSON`` and
prints one ``RESULT <json>`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]  # bench/, where ``kokoro_bench`` is imported from


def add_row_arguments(parser: argparse.ArgumentParser, systems: list[str]) -> None:
    """--threads, --weights and --systems (of ``systems``), as every bench of rows takes them."""
    parser.add_argument("--threads", type=int, default=2, help="threads for every system (default: 2)")
    parser.add_argument("--weights", help="a KModel .pth (default: the offline weights)")
    parser.add_argument(
        "--systems",
        nargs="+",
        default=systems,
        choices=systems,
        metavar="SYSTEM",
        help=f"rows to measure (default: all of {' '.join(systems)})",
    )


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MiB.

    Linux's ``ru_maxrss`` survives exec and starts at the parent's peak when the
    child was spawned by vfork (as ``subprocess`` does), so every worker read at
    least the driver's peak; ``VmHWM`` belongs to the process's own memory map.
    """
    try:
        return _status_mb("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """This process's resident memory now, in MiB."""
    return _status_mb("VmRSS")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise OSError(f"no {field} in /proc/self/status")


class WorkerFailed(RuntimeError):
    """A worker process that crashed or gave no result; ``reason`` says how in one line: the signal
    that killed it, else its stderr's last line (a traceback's exception), else its exit code."""

    def __init__(self, what: str, returncode: int, stderr: str):
        if returncode < 0:
            reason = f"killed by {signal.Signals(-returncode).name}"
        else:
            last = [line.strip() for line in stderr.splitlines() if line.strip()]
            reason = last[-1] if last else f"exit code {returncode} without a result"
        self.reason = reason if len(reason) <= 120 else reason[:117] + "..."
        super().__init__(f"{what} failed ({self.reason}):\n{stderr[-2000:]}")


def in_subprocess(
    module: str,
    mode: str,
    job: dict,
    threads: int,
    *,
    block_torch: bool,
    show_progress: bool = False,
    python: str | None = None,
) -> dict:
    """Run ``module``'s ``prepare`` or ``worker`` (or another ``--MODE`` its ``main`` knows) on ``job``
    in a fresh Python; its JSON result.

    ``block_torch``: rows that run as deployed, with numpy and TVM only. torch is installed
    here, and tvm_ffi imports it when it can (~700 MB). ``python``: another interpreter (a peer's
    virtualenv) instead of this one; ``module`` must then import with only the stdlib and numpy.
    """
    env = {**os.environ, **{v: str(threads) for v in ("TVM_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS")}}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), os.environ.get("PYTHONPATH")]))  # not installed
    blocker = "sys.modules['torch'] = None; " if mode == "worker" and block_torch else ""
    bootstrap = f"import sys; {blocker}from {module} import main; sys.exit(main())"
    cmd = [python or sys.executable, "-c", bootstrap, f"--{mode}", json.dumps(job)]
    stderr = None if mode == "prepare" or show_progress else subprocess.PIPE  # compile progress stays visible
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode or not lines:
        raise WorkerFailed(f"{mode} for {job['system']}", result.returncode, result.stderr or "")
    return json.loads(lines[-1][len("RESULT ") :])


def measure(call, repeat: int, sample_rate: int, audio_out: str | None = None) -> dict:
    """Time ``call() -> audio``: its first call (where lazy runtimes compile, caches fill and busy-waiting
    pools start: the warm-up), then the median of ``repeat`` runs. The row's timing fields; the audio is
    saved to ``audio_out``."""
    import numpy as np

    from kokoro_bench.timing import timed

    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    seconds, audio = timed(call, repeat, warmup=0)
    audio = np.asarray(audio, np.float32).reshape(-1)
    if audio_out:
        np.save(audio_out, audio)
    audio_seconds = audio.size / sample_rate
    return {
        "first_call_seconds": first,
        "seconds": seconds,
        "audio_seconds": audio_seconds,
        "rtf": seconds / audio_seconds,
        "peak_rss_mb": peak_rss_mb(),
    }


def job_main(doc: str, add_arguments, prepare, worker, run, argv: list[str] | None = None) -> int:
    """A benchmark module's ``main``: the driver, or (hidden flags) one prepare/worker job."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare or args.worker:
        result = prepare(json.loads(args.prepare)) if args.prepare else worker(json.loads(args.worker))
        print("RESULT " + json.dumps(result))
        return 0
    return run(args)
