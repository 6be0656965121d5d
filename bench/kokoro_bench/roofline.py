"""Where a synthesis spends its time, per class of operation, against this CPU's measured peaks.

For each precision's artifact (fp32, bf16, int8) on the same text: the library's per-kernel counters
(``kokoro_tvm_ext.counters``, tvm-ext/src/counters/mod.rs: calls, wall time, FLOPs and bytes per kernel and class of
call) around each stage of one synthesis; TVM-generated code is a stage's time less its kernels' time; Python and
runtime overhead is the synthesis's time less its stages'. Phases inside the kernels' tiles (quantizing and packing
activations, Winograd's transforms, col2im) are summed CPU time over the threads, shown divided by the thread count
("of which", an estimate of their wall time inside the kernel rows above them).

Peaks come from the library's microbenchmarks (``kokoro_tvm_ext.measure_peaks``, tvm-ext/src/peaks/): f32 FMA,
bf16 dot (VDPBF16PS) and int8 dot (VPDPBUSD), one core's best of five times the thread count, and memory
bandwidth on all the threads at once.
A GEMM-like row's fraction is of the compute peak of the precision its kernel runs in (a Winograd row counts
the FLOPs of the direct convolution it replaces, so it can pass 100%); an element-wise row's is of the read
bandwidth.

Medians of --repeat synthesis calls after one warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from kokoro_bench.e2e import TEXTS
from kokoro_bench.plans import one_call
from kokoro_bench.table import machine_line, print_table, set_threads

PRECISIONS = ("fp32", "bf16", "int8")
# A class whose kernels run on the FMA / dot units; every other class is element-wise (bandwidth).
COMPUTE_CLASSES = {
    "im2col conv",
    "1x1 conv (GEMM)",
    "Winograd conv",
    "transposed conv",
    "grouped conv",
    "matmul",
    "LSTM",
    "attention matmul",
    "small conv (noise convs, post conv)",
    "STFT (sine source)",
    "iSTFT",
}
PEAK_OF = {"f32": "f32_fma_gflops", "bf16": "bf16_dot_gflops", "int8": "int8_dot_gops"}
# Where the CPU has AMX the int8 and bf16 kernels multiply in its tiles: their peak is the tiles' (measured only
# where the library uses them, else null).
AMX_PEAK_OF = {"bf16": "amx_bf16_gflops", "int8": "amx_int8_gops"}


def peak_of(arith: str, peaks: dict) -> float | None:
    """The peak of the arithmetic a class runs in: AMX's tiles where they were measured, else the vector rate."""
    amx = peaks.get(AMX_PEAK_OF.get(arith, ""))
    return amx if amx else peaks.get(PEAK_OF[arith])


def _global(name: str):
    import tvm_ffi

    import kokoro_tvm_ext  # noqa: F401  (registers the library's functions)

    return tvm_ffi.get_global_func(f"kokoro_tvm_ext.{name}")


def measure_peaks(threads: int, millis: int = 300, tries: int = 5) -> dict:
    """This CPU's peaks at ``threads`` threads: one core's best of ``tries`` runs times ``threads`` (a
    peak is a ceiling, and on a shared host the second core's run is the first to lose cycles to other
    jobs), and the bandwidth measured on ``threads`` threads at once, the best of ``tries``."""
    one = [json.loads(str(_global("measure_peaks")(1, millis))) for _ in range(tries)]
    all_ = [json.loads(str(_global("measure_peaks")(threads, millis))) for _ in range(tries)]

    def best(runs, key):
        return max((r[key] for r in runs if r[key] is not None), default=None)

    peaks = {k: best(all_, k) for k in ("read_gbs", "copy_gbs")}
    for k in [*PEAK_OF.values(), *AMX_PEAK_OF.values()]:
        rate = best(one, k)
        peaks[k] = None if rate is None else round(rate * threads, 1)
    peaks["threads"] = threads
    return peaks


def kernel_precision(kernel: str) -> str:
    """The arithmetic a registered kernel runs in, from its name."""
    for p in ("int8", "bf16"):
        if kernel.endswith(f"_{p}"):
            return p
    return "f32"


def _counters(command: str) -> str:
    return str(_global("counters")(command))


def profile(artifact: Path, tokens, style, threads: int, repeat: int) -> dict:
    """Per-run seconds of each row (``{row: [s, ...]}``) and each row's work (calls, flops, bytes of one run)."""
    from kokoro_tvm_ext.model.runtime.kokoro_tvm import KokoroTVM

    model = KokoroTVM(artifact, num_threads=threads)
    run_stage = model._run
    current: dict = {}

    def counted_stage(fn, *arrays):
        _counters("reset")
        faults, cpu, start = _minor_faults(), time.process_time(), time.perf_counter()
        out = run_stage(fn, *arrays)
        took = time.perf_counter() - start
        snap = json.loads(_counters("read"))
        snap["cpu_s"], snap["minor_faults"] = time.process_time() - cpu, _minor_faults() - faults
        current[fn] = (took, snap)
        return out

    model._run = counted_stage
    _counters("on")
    seconds: dict[str, list[float]] = {}
    work: dict[str, dict] = {}
    try:
        for i in range(repeat + 1):
            current.clear()
            start = time.perf_counter()
            list(model.iter_batch([tokens], [style]))
            total = time.perf_counter() - start
            if i == 0:
                continue  # the warm-up
            rows = _rows(current, total, threads, work)
            for row, s in rows.items():
                seconds.setdefault(row, []).append(s)
    finally:
        _counters("off")
        model._run = run_stage
    return {"seconds": seconds, "work": work}


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _rows(stages: dict, total: float, threads: int, work: dict) -> dict[str, float]:
    """One run's seconds per row; fills ``work`` (the same every run) on the way."""
    rows: dict[str, float] = {}
    for stage, (took, snap) in stages.items():
        in_kernels = 0.0
        for k in snap["kernels"]:
            row = f"{k['class']} [{kernel_precision(k['kernel'])}]"
            s = k["ns"] / 1e9
            rows[row] = rows.get(row, 0.0) + s
            in_kernels += s
            w = work.setdefault(row, {"calls": 0, "flops": 0, "bytes": 0, "stages": set()})
            if stage not in w["stages"]:
                w["stages"].add(stage)
            w.setdefault("_seen", {})[(stage, k["kernel"])] = (k["calls"], k["flops"], k["bytes"])
        name = stage.replace("_", " ")
        rows[f"TVM-generated code ({name})"] = took - in_kernels
        # Not seconds: the stage's CPU time over its wall time, and the pages it touched first (4 KiB each).
        rows[f"~ {name}: CPU s / wall s"] = snap["cpu_s"] / took
        rows[f"~ {name}: minor page faults"] = snap["minor_faults"]
        for p in snap["phases"]:
            if p["ns"]:
                name = f"  of which: {p['phase']} (CPU time / threads)"
                rows[name] = rows.get(name, 0.0) + p["ns"] / 1e9 / threads
    rows["Python and runtime between stages"] = total - sum(took for took, _ in stages.values())
    rows["total"] = total
    for w in work.values():
        seen = w.get("_seen", {}).values()
        w["calls"], w["flops"], w["bytes"] = (sum(v[i] for v in seen) for i in range(3))
    return rows


def table(result: dict, peaks: dict) -> tuple[list[str], list[list]]:
    """The printed table of one precision's ``profile``."""
    med = {row: statistics.median(s) for row, s in result["seconds"].items() if not row.startswith("~")}
    total = med["total"]
    headers = ["class [arithmetic]", "ms", "share", "calls", "GFLOP", "MB", "GFLOP/s", "of peak", "GB/s", "of BW"]
    body = []
    order = sorted((r for r in med if r != "total" and not r.startswith("  ")), key=lambda r: -med[r]) + sorted(
        r for r in med if r.startswith("  ")
    )
    for row in order:
        s = med[row]
        w = result["work"].get(row)
        cells = [row, f"{1e3 * s:.1f}", f"{100 * s / total:.1f}%"]
        if w and s > 0:
            arith = row.rsplit("[", 1)[1].rstrip("]")
            klass = row.rsplit(" [", 1)[0]
            gflops, gbs = w["flops"] / s / 1e9, w["bytes"] / s / 1e9
            peak = peak_of(arith, peaks) if klass in COMPUTE_CLASSES else None
            cells += [
                w["calls"],
                f"{w['flops'] / 1e9:.2f}",
                f"{w['bytes'] / 1e6:.0f}",
                f"{gflops:.1f}",
                f"{100 * gflops / peak:.0f}%" if peak else "",
                f"{gbs:.1f}",
                f"{100 * gbs / peaks['read_gbs']:.0f}%" if klass not in COMPUTE_CLASSES else "",
            ]
        else:
            cells += [""] * 7
        body.append(cells)
    body.append(["total", f"{1e3 * total:.1f}", "100%"] + [""] * 7)
    return headers, body


def stage_notes(result: dict) -> list[str]:
    """The stages' CPU time per wall second and first-touch page faults (medians)."""
    return [
        f"{row[2:]}: {statistics.median(s):.2f}" for row, s in sorted(result["seconds"].items()) if row.startswith("~")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for the kernels and the peaks (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="synthesis calls per precision (medians)")
    parser.add_argument(
        "--text", choices=sorted(TEXTS), default="short", help="bench/e2e.py's 48-token (short) or 309-token text"
    )
    parser.add_argument(
        "--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS), help="default: all three"
    )
    parser.add_argument(
        "--artifact",
        action="append",
        default=[],
        metavar="PRECISION=DIR",
        help="an artifact directory for a precision (default: the user cache's, compiled if missing)",
    )
    parser.add_argument("--peaks-only", action="store_true", help="print this CPU's measured peaks and exit")
    parser.add_argument("--json", type=Path, help="also write the medians, the work and the peaks here")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    given = dict(a.split("=", 1) for a in args.artifact)
    unknown = set(given) - set(PRECISIONS)
    if unknown:
        parser.error(f"--artifact: unknown precision {sorted(unknown)}; use fp32, bf16 or int8")

    print(machine_line(args.threads))
    peaks = measure_peaks(args.threads)
    print(
        f"peaks at {args.threads} threads (one core's best of 5 x threads): f32 FMA {peaks['f32_fma_gflops']} "
        f"GFLOP/s, bf16 dot {peaks['bf16_dot_gflops']} GFLOP/s, int8 dot {peaks['int8_dot_gops']} GOP/s, AMX bf16 "
        f"{peaks['amx_bf16_gflops']} GFLOP/s, AMX int8 {peaks['amx_int8_gops']} GOP/s, memory read "
        f"{peaks['read_gbs']} GB/s, copy {peaks['copy_gbs']} GB/s ({args.threads} threads, best of 5)"
    )
    if args.peaks_only:
        return 0

    from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

    chunk = one_call(TEXTS[args.text], DEFAULT_VOICE)
    print(f"text: {args.text!r}, {chunk.tokens.size} tokens; medians of {args.repeat} calls after a warm-up")
    out = {"peaks": peaks, "machine": machine_line(args.threads), "precisions": {}}
    # Every artifact found (or compiled) before any runs: a loaded runtime keeps TVM's compiler out of the process.
    artifacts = {p: given.get(p) or _cached_artifact(p) for p in args.precisions}
    for precision, artifact in artifacts.items():
        result = profile(Path(artifact), chunk.tokens, chunk.style, args.threads, args.repeat)
        headers, body = table(result, peaks)
        print(f"\n{precision} ({artifact})")
        print_table(headers, body)
        print("; ".join(stage_notes(result)))
        for w in result["work"].values():
            w.pop("_seen", None)
            w["stages"] = sorted(w["stages"])
        out["precisions"][precision] = {
            "medians": {r: statistics.median(s) for r, s in result["seconds"].items()},
            "work": result["work"],
        }
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def _cached_artifact(precision: str) -> Path:
    from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
    from kokoro_tvm_ext.model.weights import find_weights

    return ensure_artifact(find_weights(None), precision=precision)
