"""End-to-end Kokoro-82M: our TVM artifact against every CPU runtime people use for it, side by side.

The same texts (48 and 309 tokens), the same weights (the offline default, or
--weights), the same voice, the same thread count, median of --repeat runs
after one warm-up.

Rows:
  tvm            our compiled artifact (compiled first if it is not cached)
  tvm-fast       the same with precision="bf16" (bf16 convolutions and matmuls, f32
                 accumulation) where the runtime has bf16 kernels for this CPU (x86: AVX512-BF16),
                 else the fp32 artifact; the note says so
  tvm-int8       the same with precision="int8" (int8 convolutions and matmuls, int32
                 accumulation) where it has int8 kernels for this CPU (x86: AVX512-VNNI), else fp32
  torch          hexgrad's KModel, eager
  torch-compile  KModel's forward through torch.compile (inductor)
  zentorch       the same with AMD's zentorch backend, where it loads for the torch in use
                 (x86-64 only: no aarch64 wheel, a row that says so there)
  openvino-fp32  OpenVINO's CPU plugin on the fp32 ONNX graph below, f32 precision hint
  openvino-bf16  the same with the bf16 hint (f32 where OpenVINO has no bf16 path for the CPU:
                 older x86, and every aarch64 CPU in its source today); the note says what it chose
  ort-int8       ONNX Runtime on the int8 export our offline weights come from
  ort-fp32       ONNX Runtime on that export with its quantization undone: the same
                 fp32 weights as every other row (see onnx_fp32.py)
  kokoro-pi      kokoro-pi's float graph (its rewrites and fused Snake on that fp32 graph,
                 its pinned ONNX Runtime), in a virtualenv of its own (venv_peers.py)
  vox-tts        vox-tts's native engine, f32, converted by its build_kokoro from our
                 weights, in a virtualenv of its own; it speaks the phonemes itself

A row whose runtime has no wheel for this machine's architecture (``ONLY_ON``) or is not
installed shows the reason instead of numbers; --machine prints the machine line and which
rows run here, and exits.

Every row runs at --threads and at 1 thread, the two processes one after the
other for each text (skip the second with --no-single-thread).

Text -> phonemes -> tokens (``Speaker.plan``) runs once, up front; each text is
one call of all its tokens (plans.py: the plan's sentence chunks joined), as
the peers run it. Each system then runs in a fresh process that gets only
those (the tvm rows with torch blocked from import, as deployed), so its peak
RSS is what it needs to synthesize. Our rows and PyTorch eager plan the
phonemes through ``Speaker`` (the pipeline every front end uses: the same
tokens, the style row KPipeline picks, seed 0) and synthesize that one call;
the other peers get the tokens and that style row directly. "compile s"
is each row's one-time cost: our compile, ONNX Runtime's session, OpenVINO's
conversion, torch.compile's first call (less a steady call).

Fidelity, every row against PyTorch fp32 with our seeded noise (harness/kokoro_harness/fidelity.py):
log-mel L1 (HiFi-GAN's mel distance), a multi-resolution STFT distance, waveform
SNR (only where the lengths agree), and, with the recognizer extra, Whisper
base's word error rate against the text. Only the tvm rows get the reference's
noise; the others draw their own, so the torch row's distances are the noise
floor: the same model in the same precision, only the noise differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from kokoro_bench.onnx_fp32 import onnx_model
from kokoro_bench.plans import as_one_call, one_call
from kokoro_bench.table import machine_line
from kokoro_bench.timing import timed
from kokoro_bench.workers import WorkerFailed, add_row_arguments, in_subprocess, job_main, measure
from kokoro_tvm_ext.model.runtime.cpu_features import host_arch
from kokoro_tvm_ext.model.spec import SAMPLE_RATE, add_boundary_ids
from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE

TEXTS = {  # 48 and 309 tokens with the default G2P
    "short": "The quick brown fox jumps over the lazy dog.",
    "long": (
        "Kokoro is a small text to speech model with eighty two million parameters. "
        "It predicts how long each sound lasts, then a vocoder builds the audio frame by frame. "
        "Running it on a plain processor should be fast enough for real time use. "
        "An edge box or a server needs to know the cost per second of audio."
    ),
}
SYSTEMS = [
    "tvm",
    "tvm-fast",
    "tvm-int8",
    "torch",
    "torch-compile",
    "zentorch",
    "openvino-fp32",
    "openvino-bf16",
    "ort-int8",
    "ort-fp32",
    "kokoro-pi",
    "vox-tts",
]
OURS = {"tvm": "fp32", "tvm-fast": "bf16", "tvm-int8": "int8"}  # row -> the artifact's precision
ONNX_ROWS = {"ort-int8": "int8", "ort-fp32": "fp32", "openvino-fp32": "fp32", "openvino-bf16": "fp32"}
# Rows whose runtime has PyPI wheels for some architectures only (pip download --platform, 2026-11-28): zentorch,
# AMD's torch.compile backend for EPYC, is x86-64 only. Every other row's runtime has manylinux aarch64 wheels:
# torch, onnxruntime, kokoro-pi (and its onnxruntime 1.30), vox-tts; OpenVINO's need glibc 2.31 (2.35 from
# 2025.3 on).
ONLY_ON = {"zentorch": ("x86_64",)}
# Row prefix -> the runtime module it needs (the bench extra); without it the row says so and the others run.
RUNTIMES = {"ort": "onnxruntime", "openvino": "openvino"}
# Modules every run needs, whatever its rows -> the extra that has them: the fidelity columns' mel filters and
# their PyTorch fp32 reference.
NEEDED = {"librosa": "bench", "torch": "compile", "kokoro": "compile"}
JSON_KEYS = (
    "system",
    "tokens",
    "seconds",
    "audio_seconds",
    "rtf",
    "threads",
    "single_thread_seconds",
    "single_thread_rtf",
    "peak_rss_mb",
    "compile_seconds",
    "log_mel_l1",
    "mrstft",
    "snr_db",
    "wer",
    "noise",
    "note",
    "unavailable",
    "failed",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_row_arguments(parser, SYSTEMS)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell, after one warm-up (default: 5)")
    parser.add_argument("--voice", default=DEFAULT_VOICE, help="voice for every system (default: %(default)s)")
    parser.add_argument(
        "--no-transcribe", action="store_true", help="skip the recognizer's word error rate (Whisper base, ~1 s/row)"
    )
    parser.add_argument(
        "--no-single-thread", action="store_true", help="skip the 1-thread column (each row runs once, not twice)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")
    parser.add_argument(
        "--machine", action="store_true", help="print the machine line and which rows run here, then exit"
    )


# -- measuring, inside one worker process ------------------------------------------------


def worker(job: dict) -> dict:
    """Synthesize ``job``'s input with one system; the row for the table."""
    import time

    import numpy as np

    from kokoro_bench import peers

    data = np.load(job["inputs"])
    tokens, repeat, system = data["tokens"], job["repeat"], job["system"]
    row = {"system": system, "tokens": int(tokens.size), "noise": "same" if system in OURS else "own"}
    start = time.perf_counter()
    try:
        call, stages, precision = _runner(job, data)
    except peers.Unavailable as err:
        return {**row, "unavailable": str(err)}
    setup = time.perf_counter() - start
    row.update(measure(call, repeat, SAMPLE_RATE, job.get("audio_out")))  # audio_out: the driver measures fidelity
    first = row.pop("first_call_seconds")
    if system not in OURS and system != "torch":  # ours: compiled ahead of time, the artifact's meta says how long
        row["compile_seconds"] = setup + max(first - row["seconds"], 0.0)
    note = precision_note(system, job.get("precision"), precision)
    if note:
        row["note"] = note
    if stages and job.get("stages", True):
        row["stages"] = stages()
    return row


def precision_note(system: str, artifact: str | None, peer: str | None) -> str | None:
    """The note on the precision a row ran in: for ours, the artifact's (``artifact``, from its meta) where the
    runtime chose another than the row asks for on this CPU (bf16 or int8 without their kernels here); for a
    peer, the one it reports it chose (``peer``)."""
    if system in OURS:
        asked = OURS[system]
        return None if artifact in (None, asked) else f"precision {artifact} ({asked} has no kernels for this CPU)"
    return f"precision {peer}" if peer else None


def _runner(job: dict, data):
    """(``call() -> audio``, a per-stage timer or None, the precision a peer chose or None) for
    ``job``'s system on ``data`` (``write_inputs``)."""
    from kokoro_bench import peers

    system, threads = job["system"], job["threads"]
    ids, style = add_boundary_ids(data["tokens"])[None], data["style"]
    if system in OURS:
        from kokoro_tvm_ext.speech import Speaker

        speaker = Speaker.load(job["artifact"])
        return _speaking(speaker, data), lambda: tvm_stages(speaker.model, ids, style), None
    if system == "torch":
        import torch

        from kokoro_tvm_ext.speech import Speaker

        speaker = Speaker(peers.torch_eager(job["weights"], threads))
        ids_t, style_t = torch.from_numpy(ids), torch.from_numpy(style)

        def stages():
            with torch.no_grad():
                return torch_stages(speaker.model.model, ids_t, style_t)

        return _speaking(speaker, data), stages, None
    if system == "torch-compile":
        run = peers.torch_compiled(job["weights"], threads, "inductor")
    elif system == "zentorch":
        run = peers.torch_compiled(job["weights"], threads, "zentorch")
    elif system.startswith("openvino"):
        run = peers.openvino_model(job["onnx"], threads, system.split("-")[1].replace("fp32", "f32"))
    else:
        run = peers.onnxruntime_session(job["onnx"], threads)
    return (lambda: run(ids, style)), None, getattr(run, "precision", None)


def _speaking(speaker, data):
    """A call that gives the audio: ``speaker`` plans the input's phonemes in its voice (seed 0) and synthesizes
    them as the one call the peers get (plans.as_one_call). Checked first: the very tokens and style row."""
    import numpy as np

    from kokoro_tvm_ext.speech import Voice

    phonemes, voice = str(data["phonemes"]), Voice.load(str(data["voice"]))

    def planned():
        return as_one_call(speaker.plan(phonemes=phonemes, voice=voice, seed=0))

    chunk = planned()
    if not (np.array_equal(chunk.tokens, data["tokens"]) and np.array_equal(chunk.style, data["style"])):
        raise RuntimeError("Speaker planned other tokens or another style row than the peers get")
    return lambda: next(speaker.synthesize([planned()]))[0]


def tvm_stages(tts, ids, style) -> dict:
    import numpy as np

    from kokoro_tvm_ext.model.runtime.noise import make_noise

    args = (ids, np.array([ids.shape[1]]), style, np.ones(1, np.float32))
    t_text, (dur, d, t_en) = timed(lambda: tts._run("text_stage", *args), 3)
    index = np.repeat(np.arange(ids.shape[1]), dur[0])
    en, asr = d[0][index].T[None].copy(), t_en[0][:, index][None].copy()
    noise = make_noise(len(index), 0)
    t_audio, _ = timed(lambda: tts._run("audio_stage", en, asr, style, noise["phase_noise"], noise["sine_noise"]), 3)
    return {"text (bert, encoders, durations)": t_text, "audio (F0/N + decoder)": t_audio}


def torch_stages(model, ids, ref_s) -> dict:
    import torch

    from kokoro_tvm_ext.model.adapters.reference import _durations

    t_text, (d, dur) = timed(lambda: _durations(model, ids, ref_s, 1.0), 3)
    index = torch.repeat_interleave(torch.arange(ids.shape[1]), dur)
    en = d.transpose(-1, -2)[:, :, index]
    t_f0n, (f0, n) = timed(lambda: model.predictor.F0Ntrain(en, ref_s[:, 128:]), 3)
    asr = model.text_encoder(ids, torch.tensor([ids.shape[1]]), torch.zeros_like(ids, dtype=torch.bool))[:, :, index]
    t_dec, _ = timed(lambda: model.decoder(asr, f0, n, ref_s[:, :128]), 3)
    return {"text (bert, encoders, durations)": t_text, "audio (F0/N + decoder)": t_f0n + t_dec}


# -- preparing, in a process of its own (its memory must not count) ---------------------


def prepare(job: dict) -> dict:
    """What a system's worker needs on disk: the compiled artifact, the ONNX file or the weights; for a
    peer in a virtualenv of its own, its built model and where its worker runs (``python``, ``module``);
    ``unavailable`` with the reason where the row cannot run here."""
    from kokoro_bench import peers, venv_peers
    from kokoro_tvm_ext.model.weights import find_weights

    if job["system"] in venv_peers.PEERS:
        try:
            return venv_peers.prepare(job["system"], job["weights"], job["voice"], job["threads"])
        except peers.Unavailable as err:
            return {"unavailable": str(err)}

    weights = find_weights(job["weights"])
    if job["system"] in OURS:
        from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
        from kokoro_tvm_ext.model.runtime.artifact import read_meta

        artifact = ensure_artifact(weights, precision=OURS[job["system"]])
        meta = read_meta(artifact)
        return {"artifact": str(artifact), "compile_seconds": meta["compile_seconds"], "precision": meta["precision"]}
    if job["system"] in ONNX_ROWS:
        return {"onnx": str(onnx_model(ONNX_ROWS[job["system"]]))}
    return {"weights": str(weights.ensure_file())}


def write_inputs(text: str, voice: str, weights, path: Path) -> None:
    """Every row's input in one file: the text's phonemes and voice (for the rows that speak through
    ``Speaker``), and their tokens and style row (``pack[len(tokens) - 1]``, for the peers), all from
    ``Speaker.plan`` as one call (plans.one_call)."""
    import numpy as np

    chunk = one_call(text, voice, weights.config["vocab"])
    np.savez(
        path,
        phonemes=np.array(chunk.phonemes),
        voice=np.array(voice),
        tokens=chunk.tokens,
        ids=add_boundary_ids(chunk.tokens)[None],  # for workers without our package
        style=chunk.style,
    )


# -- driver -----------------------------------------------------------------------------


def missing_needed() -> list[str]:
    """What every run needs (``NEEDED``) and is not installed, with the extra to install: one line each."""
    from importlib.util import find_spec

    return [f"{m} (pip install 'kokoro-tvm-ext[{extra}]')" for m, extra in NEEDED.items() if not find_spec(m)]


def check_installed() -> None:
    """Name the extra to install when a module every run needs is missing."""
    from kokoro_tvm_ext.errors import MissingAssetError

    missing = missing_needed()
    if missing:
        raise MissingAssetError(f"the bench needs {' and '.join(missing)} for its fidelity columns")


def unavailable_here(systems, arch: str | None = None) -> dict[str, str]:
    """The rows of ``systems`` that cannot run on this machine (``arch``: its architecture by default), each
    with the one-line reason the table shows: no wheel of its runtime for the architecture, or not installed."""
    from importlib.util import find_spec

    arch = arch or host_arch()
    reasons = {}
    for system in systems:
        only = ONLY_ON.get(system)
        runtime = next((m for prefix, m in RUNTIMES.items() if system.startswith(prefix)), None)
        if only and arch not in only:
            reasons[system] = f"its runtime has no {arch} wheel on PyPI (only {', '.join(only)})"
        elif runtime and not find_spec(runtime):
            reasons[system] = f"{runtime} is not installed (pip install 'kokoro-tvm-ext[bench]')"
    return reasons


def print_machine(systems, thread_counts: list[int]) -> None:
    """--machine: the machine line, and which of ``systems`` run here (the others with their reason)."""
    print(machine_line(thread_counts))
    skipped = unavailable_here(systems)
    for system in systems:
        print(f"  {system}: {'unavailable: ' + skipped[system] if system in skipped else 'can run here'}")
    for missing in missing_needed():
        print(f"  every row needs {missing}")


def run(args) -> int:
    thread_counts = [args.threads] if args.no_single_thread or args.threads == 1 else [args.threads, 1]
    if args.machine:
        print_machine(args.systems, thread_counts)
        return 0
    check_installed()
    from kokoro_tvm_ext.model.weights import find_weights

    weights = find_weights(args.weights)
    skipped = unavailable_here(args.systems)
    rows, runs, failed = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for key, text in TEXTS.items():
            inputs[key] = Path(tmp) / f"{key}.npz"
            write_inputs(text, args.voice, weights, inputs[key])
        for system in args.systems:
            if system in skipped:
                rows.append({"system": system, "unavailable": skipped[system]})
                print(f"  {system} is unavailable: {skipped[system]}", file=sys.stderr, flush=True)
                continue
            print(f"preparing {system}", file=sys.stderr, flush=True)
            job = {"system": system, "weights": args.weights, "voice": args.voice, "threads": args.threads}
            ready = in_subprocess(__name__, "prepare", job, args.threads, block_torch=False)
            if "unavailable" in ready:
                rows.append({"system": system, "unavailable": ready["unavailable"]})
                print(f"  {system} is unavailable: {ready['unavailable']}", file=sys.stderr, flush=True)
                continue
            failed += measure_system(system, ready, inputs, thread_counts, args, tmp, runs)
            rows += [r for r in runs if r["system"] == system and r.get("threads", args.threads) == args.threads]
        measured = merge_thread_counts(rows, runs, args.threads)
        add_fidelity(measured, weights, transcribe=not args.no_transcribe)

    print(machine_line(thread_counts))
    print_rows(rows, args.threads)
    if args.json:
        Path(args.json).write_text(json.dumps([{k: r[k] for k in JSON_KEYS if k in r} for r in rows], indent=2))
    return 1 if failed else 0


def measure_system(system: str, ready: dict, inputs: dict, thread_counts: list[int], args, tmp: str, runs: list) -> int:
    """Each text through ``system`` at each thread count, a fresh process per run (interleaved: text by
    text, the thread counts one after the other); the rows go to ``runs``. How many runs failed."""
    failed = 0
    python, module = ready.pop("python", None), ready.pop("module", __name__)
    for key in TEXTS:
        for threads in thread_counts:
            job = {**ready, "system": system, "inputs": str(inputs[key]), "repeat": args.repeat}
            job.update(threads=threads, sample_rate=SAMPLE_RATE)
            job["stages"] = threads == args.threads  # the fidelity and stage columns: the main thread count's
            if job["stages"]:
                job["audio_out"] = str(Path(tmp) / f"{system}-{key}.npy")
            try:
                row = in_subprocess(module, "worker", job, threads, block_torch=system in OURS, python=python)
            except WorkerFailed as err:  # a row that says so, not a missing one
                print(err, file=sys.stderr)
                failed += 1
                runs.append({"system": system, "text": key, "threads": threads, "failed": err.reason})
                continue
            if "compile_seconds" in ready:
                row["compile_seconds"] = ready["compile_seconds"]
            row.update(text=key, threads=threads, audio_path=job.get("audio_out"), inputs_path=job["inputs"])
            runs.append(row)
            if "unavailable" in row:
                print(f"  {system} is unavailable: {row['unavailable']}", file=sys.stderr, flush=True)
                return failed
            what = f"{threads} thread{'s' if threads > 1 else ''}"
            print(f"  measured {system} on the {key} text, {what}: RTF {row['rtf']:.3f}", file=sys.stderr, flush=True)
    return failed


def merge_thread_counts(rows: list[dict], runs: list[dict], threads: int) -> list[dict]:
    """Give each measured row of ``rows`` (run at ``threads``) its 1-thread run's seconds and RTF from
    ``runs``; the measured rows."""
    single = {(r["system"], r["text"]): r for r in runs if r.get("threads") == 1 and "rtf" in r}
    measured = [r for r in rows if "rtf" in r]
    for r in measured:
        one = single.get((r["system"], r["text"])) if threads != 1 else None
        if one:
            r.update(single_thread_seconds=one["seconds"], single_thread_rtf=one["rtf"])
    return measured


def add_fidelity(rows: list[dict], weights, transcribe: bool) -> None:
    """Each row's distances from PyTorch fp32 fed our seeded noise (and its transcript's WER)."""
    import numpy as np
    from kokoro_harness import fidelity

    from kokoro_tvm_ext.model.adapters.reference import reference
    from kokoro_tvm_ext.model.weights import load_kmodel

    print("measuring fidelity against PyTorch fp32", file=sys.stderr, flush=True)
    model, references = load_kmodel(weights), {}
    recognizer = fidelity.transcriber() if transcribe else None
    for r in rows:
        if r["inputs_path"] not in references:
            data = np.load(r["inputs_path"])
            references[r["inputs_path"]] = reference(model, data["tokens"], data["style"], speed=1.0, noise_seed=0)[0]
        ref, audio = references[r["inputs_path"]], np.load(r["audio_path"])
        r.update(
            log_mel_l1=fidelity.log_mel_l1(audio, ref),
            mrstft=fidelity.mrstft(audio, ref),
            snr_db=fidelity.snr_db(audio, ref),
        )
        if audio.size != ref.size:
            r["note"] = "; ".join(filter(None, [r.get("note"), f"{audio.size - ref.size:+d} samples"]))
        if recognizer:
            r["wer"] = fidelity.word_error_rate(recognizer(audio), TEXTS[r["text"]])


def print_rows(rows: list[dict], threads: int) -> None:
    """The table: one line per system and text, RTF at ``threads`` and (where measured) at 1 thread; the
    other columns from the ``threads`` run. A row that cannot run here, or whose worker failed, shows its
    reason."""
    from kokoro_bench.table import print_table

    def num(r, key, fmt):
        return "" if r.get(key) is None else format(r[key], fmt)

    single = threads != 1 and any("single_thread_rtf" in r for r in rows)
    headers = ["system", "tokens", "seconds", "audio s", f"RTF {threads} thread{'s' if threads > 1 else ''}"]
    headers += ["RTF 1 thread"] if single else []
    headers += ["peak RSS MB", "compile s", "log-mel L1", "MR-STFT", "SNR dB", "WER", "noise", "note"]
    lines = []
    for r in rows:
        if "unavailable" in r or "failed" in r:
            what = "unavailable" if "unavailable" in r else "failed"
            cells = ["", "", what] + [""] * (len(headers) - 6) + [r[what]]
        else:
            cells = [num(r, "seconds", ".3f"), num(r, "audio_seconds", ".2f"), num(r, "rtf", ".3f")]
            cells += [num(r, "single_thread_rtf", ".3f")] if single else []
            cells += [num(r, "peak_rss_mb", ".0f"), num(r, "compile_seconds", ".0f"), num(r, "log_mel_l1", ".3f")]
            cells += [num(r, "mrstft", ".3f"), num(r, "snr_db", ".1f"), num(r, "wer", ".2f"), r["noise"]]
            cells += [r.get("note", "")]
        lines.append([r["system"], r.get("tokens", "")] + cells)
    print_table(headers, lines)
    print_targets([r for r in rows if "rtf" in r], "rtf", f"{threads} threads")
    if single:
        print_targets([r for r in rows if "single_thread_rtf" in r], "single_thread_rtf", "1 thread")
    print("\nper stage (seconds, medians):")
    print_table(
        ["system", "tokens", "stage", "seconds"],
        [[r["system"], r["tokens"], name, f"{t:.3f}"] for r in rows for name, t in r.get("stages", {}).items()],
    )


def print_targets(rows: list[dict], key: str = "rtf", label: str = "") -> None:
    """Our RTF (``key``) as a fraction of the fastest other row's, per text."""
    for tokens in sorted({r["tokens"] for r in rows}):
        peers = [r for r in rows if r["tokens"] == tokens and r["system"] not in OURS]
        if not peers:
            continue
        best = min(peers, key=lambda r: r[key])
        mine = [r for r in rows if r["tokens"] == tokens and r["system"] in OURS]
        ours = ", ".join(f"{r['system']} {r[key] / best[key]:.2f}x" for r in mine)
        where = f"{tokens} tokens" + (f", {label}" if label else "")
        print(f"{where}: fastest peer {best['system']} (RTF {best[key]:.3f}); ours: {ours or 'not measured'}")


def main(argv: list[str] | None = None) -> int:
    return job_main(__doc__, add_arguments, prepare, worker, run, argv)


if __name__ == "__main__":
    sys.exit(main())
