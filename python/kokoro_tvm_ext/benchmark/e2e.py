"""End-to-end Kokoro-82M: our TVM artifact vs PyTorch eager vs ONNX Runtime, side by side.

The same texts (48 and 309 tokens), the same weights (the offline default, or
--weights), the same voice, the same thread count, median of --repeat runs
after one warm-up.

Rows:
  tvm       our compiled artifact (compiled first if it is not cached)
  tvm-fast  the same with precision="bf16" (bf16 convolutions and matmuls, f32
            accumulation; f32 where the CPU lacks AVX512-BF16)
  torch     hexgrad's KModel, eager
  ort-int8  ONNX Runtime on the int8 export our offline weights come from
  ort-fp32  ONNX Runtime on that export with its quantization undone: the same
            fp32 weights as every other row (see onnx_fp32.py)

Text -> tokens (G2P) runs once, up front. Each system then runs in a fresh
process that gets only tokens and style (the tvm row with torch blocked from
import, as deployed), so its peak RSS is what it needs to
synthesize; compiling and model conversion happen in a separate process
before any timing. A per-stage breakdown is printed for tvm and torch.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from ..assets.voices import DEFAULT_VOICE
from ..model_spec import MAX_TOKENS, SAMPLE_RATE, add_boundary_ids
from .timing import timed
from .workers import in_subprocess, job_main, peak_rss_mb

TEXTS = {  # 48 and 309 tokens with the default G2P
    "short": "The quick brown fox jumps over the lazy dog.",
    "long": (
        "Kokoro is a small text to speech model with eighty two million parameters. "
        "It predicts how long each sound lasts, then a vocoder builds the audio frame by frame. "
        "Running it on a plain processor should be fast enough for real time use. "
        "An edge box or a server needs to know the cost per second of audio."
    ),
}
SYSTEMS = ["tvm", "tvm-fast", "torch", "ort-int8", "ort-fp32"]
PRECISION = {"tvm": "fp32", "tvm-fast": "bf16"}
JSON_KEYS = ("system", "tokens", "seconds", "audio_seconds", "rtf", "peak_rss_mb", "compile_seconds", "snr_db")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=2, help="threads for every system (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell, after one warm-up (default: 5)")
    parser.add_argument("--voice", default=DEFAULT_VOICE, help="voice for every system (default: %(default)s)")
    parser.add_argument("--weights", help="a KModel .pth (default: the offline weights)")
    parser.add_argument(
        "--systems",
        nargs="+",
        default=SYSTEMS,
        choices=SYSTEMS,
        metavar="SYSTEM",
        help=f"rows to measure (default: all of {' '.join(SYSTEMS)})",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")


# -- measuring, inside one worker process ------------------------------------------------


def worker(job: dict) -> dict:
    """Synthesize ``job``'s tokens with one system; the row for the table."""
    import numpy as np

    data = np.load(job["inputs"])
    tokens, style, repeat = data["tokens"], data["style"], job["repeat"]
    ids = add_boundary_ids(tokens)[None]
    row = {"system": job["system"], "tokens": int(tokens.size)}
    if job["system"] in PRECISION:
        from kokoro_tvm_ext.runtime import KokoroTVM

        tts = KokoroTVM(job["artifact"])
        seconds, (audio, _) = timed(lambda: tts.synthesize(tokens, style), repeat)
        row["stages"] = tvm_stages(tts, ids, style)
    elif job["system"] == "torch":
        import torch

        from kokoro_tvm_ext.assets import load_model

        torch.set_num_threads(job["threads"])
        model = load_model(job["weights"])
        ids_t, style_t = torch.from_numpy(ids), torch.from_numpy(style)
        with torch.no_grad():
            seconds, (audio, _) = timed(lambda: model.forward_with_tokens(ids_t, style_t, 1.0), repeat)
            row["stages"] = torch_stages(model, ids_t, style_t)
        audio = audio.numpy()
    else:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = job["threads"], 1
        session = ort.InferenceSession(job["onnx"], opts, providers=["CPUExecutionProvider"])
        feed = {"tokens": ids, "style": style, "speed": np.ones(1, np.float32)}
        seconds, (audio,) = timed(lambda: session.run(None, feed), repeat)
    audio_seconds = np.asarray(audio).size / SAMPLE_RATE
    row.update(seconds=seconds, audio_seconds=audio_seconds, rtf=seconds / audio_seconds, peak_rss_mb=peak_rss_mb())
    if "audio_out" in job:  # for the SNR, which the driver computes
        np.save(job["audio_out"], np.asarray(audio, np.float32))
    return row


def snr_db(model, audio_path: str, inputs_path: str):
    """SNR of the saved audio against PyTorch fp32 (hexgrad's KModel) fed the same
    noise (``synthesize``'s default seed 0); None when the lengths differ."""
    import numpy as np

    from kokoro_tvm_ext.kokoro.reference import reference

    data, audio = np.load(inputs_path), np.load(audio_path).astype(np.float64)
    ref, _ = reference(model, data["tokens"], data["style"], speed=1.0, noise_seed=0)
    if ref.shape != audio.shape:
        return None
    return float(10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((audio - ref) ** 2)))


def tvm_stages(tts, ids, style) -> dict:
    import numpy as np

    from kokoro_tvm_ext.runtime.noise import make_noise

    args = (ids, np.array([ids.shape[1]]), style, np.ones(1, np.float32))
    t_text, (dur, d, t_en) = timed(lambda: tts._run("text_stage", *args), 3)
    index = np.repeat(np.arange(ids.shape[1]), dur[0])
    en, asr = d[0][index].T[None].copy(), t_en[0][:, index][None].copy()
    noise = make_noise(len(index), 0)
    t_audio, _ = timed(lambda: tts._run("audio_stage", en, asr, style, noise["phase_noise"], noise["sine_noise"]), 3)
    return {"text (bert, encoders, durations)": t_text, "audio (F0/N + decoder)": t_audio}


def torch_stages(model, ids, ref_s) -> dict:
    import torch

    from kokoro_tvm_ext.kokoro.reference import _durations

    t_text, (d, dur) = timed(lambda: _durations(model, ids, ref_s, 1.0), 3)
    index = torch.repeat_interleave(torch.arange(ids.shape[1]), dur)
    en = d.transpose(-1, -2)[:, :, index]
    t_f0n, (f0, n) = timed(lambda: model.predictor.F0Ntrain(en, ref_s[:, 128:]), 3)
    asr = model.text_encoder(ids, torch.tensor([ids.shape[1]]), torch.zeros_like(ids, dtype=torch.bool))[:, :, index]
    t_dec, _ = timed(lambda: model.decoder(asr, f0, n, ref_s[:, :128]), 3)
    return {"text (bert, encoders, durations)": t_text, "audio (F0/N + decoder)": t_f0n + t_dec}


# -- preparing, in a process of its own (its memory must not count) ---------------------


def prepare(job: dict) -> dict:
    """What a system's worker needs on disk: the compiled artifact or the ONNX file."""
    from kokoro_tvm_ext.assets import resolve

    weights = resolve(job["weights"])
    if job["system"] in PRECISION:
        from kokoro_tvm_ext.artifact_cache import ensure_artifact
        from kokoro_tvm_ext.runtime.artifact import read_meta

        artifact = ensure_artifact(weights, precision=PRECISION[job["system"]])
        return {"artifact": str(artifact), "compile_seconds": read_meta(artifact)["compile_seconds"]}
    if job["system"] in ("ort-int8", "ort-fp32"):
        return {"onnx": str(onnx_model(job["system"]))}
    return {"weights": str(weights.path)}


def onnx_model(system: str) -> Path:
    """The int8 export our weights come from, or (ort-fp32) the same graph dequantized."""
    from kokoro_tvm_ext.assets.cache import atomic_write, cache_dir
    from kokoro_tvm_ext.assets.onnx_parts import assemble_onnx

    int8 = cache_dir() / "bench" / "kokoro-v1.0.int8.onnx"
    if not int8.is_file():
        with atomic_write(int8) as f:
            f.write(assemble_onnx())
    if system == "ort-int8":
        return int8
    fp32 = cache_dir() / "bench" / "kokoro-v1.0.dequantized-fp32.onnx"
    if not fp32.is_file():
        import onnx

        from .onnx_fp32 import dequantized_model

        with atomic_write(fp32) as f:
            f.write(dequantized_model(onnx.load(str(int8))).SerializeToString())
    return fp32


def write_inputs(text: str, voice: str, weights, path: Path) -> None:
    import numpy as np

    from kokoro_tvm_ext.assets import chunk_text, load_voice, style_for, tokenize

    vocab = weights.config["vocab"]
    tokens = tokenize(" ".join(chunk_text(text, vocab)), vocab)
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"benchmark text has {len(tokens)} tokens; keep it within {MAX_TOKENS}")
    np.savez(path, tokens=np.array(tokens, np.int64), style=style_for(load_voice(voice), len(tokens)))


# -- driver -----------------------------------------------------------------------------


def run(args) -> int:
    from kokoro_tvm_ext.assets import resolve

    from .table import machine_line, print_table

    weights = resolve(args.weights)
    rows, jobs = [], []  # jobs[i] measured rows[i]
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {}
        for key, text in TEXTS.items():
            inputs[key] = Path(tmp) / f"{key}.npz"
            write_inputs(text, args.voice, weights, inputs[key])
        for system in args.systems:
            print(f"preparing {system}", file=sys.stderr, flush=True)
            ready = in_subprocess(
                __name__, "prepare", {"system": system, "weights": args.weights}, args.threads, block_torch=False
            )
            for key in TEXTS:
                job = {
                    **ready,
                    "system": system,
                    "inputs": str(inputs[key]),
                    "repeat": args.repeat,
                    "threads": args.threads,
                }
                if system in PRECISION:
                    job["audio_out"] = str(Path(tmp) / f"{system}-{key}.npy")
                try:
                    row = in_subprocess(__name__, "worker", job, args.threads, block_torch=system in PRECISION)
                except RuntimeError as err:
                    print(err, file=sys.stderr)
                    continue
                if "compile_seconds" in ready:
                    row["compile_seconds"] = ready["compile_seconds"]
                rows.append(row)
                jobs.append(job)
                print(f"  measured {system} on the {key} text: RTF {row['rtf']:.3f}", file=sys.stderr, flush=True)
        with_audio = [(r, job) for r, job in zip(rows, jobs) if "audio_out" in job]
        if with_audio:
            from kokoro_tvm_ext.assets import load_model

            model = load_model(weights)
            for r, job in with_audio:
                r["snr_db"] = snr_db(model, job["audio_out"], job["inputs"])

    print(machine_line(args.threads))
    print_table(
        ["system", "tokens", "seconds", "audio s", "RTF", "peak RSS MB", "compile s", "SNR dB"],
        [
            [
                r["system"],
                r["tokens"],
                f"{r['seconds']:.3f}",
                f"{r['audio_seconds']:.2f}",
                f"{r['rtf']:.3f}",
                f"{r['peak_rss_mb']:.0f}",
                f"{r['compile_seconds']:.0f}" if "compile_seconds" in r else "",
                "" if r.get("snr_db") is None else f"{r['snr_db']:.1f}",
            ]
            for r in rows
        ],
    )
    print("\nper stage (seconds, medians):")
    print_table(
        ["system", "tokens", "stage", "seconds"],
        [[r["system"], r["tokens"], name, f"{t:.3f}"] for r in rows for name, t in r.get("stages", {}).items()],
    )
    if args.json:
        Path(args.json).write_text(json.dumps([{k: r[k] for k in JSON_KEYS if k in r} for r in rows], indent=2))
    return 0 if len(rows) == len(args.systems) * len(TEXTS) else 1


def main(argv: list[str] | None = None) -> int:
    return job_main(__doc__, add_arguments, prepare, worker, run, argv)


if __name__ == "__main__":
    sys.exit(main())
