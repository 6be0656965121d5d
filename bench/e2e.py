"""End-to-end Kokoro-82M: our TVM artifact vs PyTorch eager vs ONNX Runtime, side by side.

The same texts (about 50 and about 300 tokens), the same weights (the offline
default, or --weights), the same voice, 2 threads each, median of --repeat runs
after one warm-up. Each system runs in its own subprocess so its peak RSS is its own.

Rows: tvm (our artifact), torch (hexgrad's KModel eager), ort-int8 (the int8 ONNX
model the weights come from), ort-fp32 (that export with its quantization undone, i.e. the
same fp32 weights as every other row; see onnx_fp32.py). Also a per-stage breakdown
for tvm and torch.

Usage: python bench/e2e.py [--threads 2] [--repeat 5] [--json rows.json]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_line, print_table, set_threads  # noqa: E402

TEXTS = {  # 48 and 309 tokens with the default G2P
    "short": "The quick brown fox jumps over the lazy dog.",
    "long": (
        "Kokoro is a small text to speech model with eighty two million parameters. "
        "It predicts how long each sound lasts, then a vocoder builds the audio frame by frame. "
        "Running it on a plain processor should be fast enough for real time use. "
        "An edge box or a server needs to know the cost per second of audio."
    ),
}
SYSTEMS = ["tvm", "torch", "ort-int8", "ort-fp32"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, repeat: int):
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2], out


def inputs(text: str, voice: str, weights):
    from kokoro_tvm_ext.assets import chunk_text, load_voice, style_for, tokenize

    vocab = weights.config["vocab"]
    tokens = tokenize(" ".join(chunk_text(text, vocab)), vocab)
    if len(tokens) > 510:
        raise ValueError(f"benchmark text has {len(tokens)} tokens; keep it within 510")
    return tokens, style_for(load_voice(voice), len(tokens))


# -- workers: one system, one process ---------------------------------------------------

def worker(system: str, text: str, args) -> dict:
    import numpy as np

    from kokoro_tvm_ext.assets import resolve

    weights = resolve(args.weights)
    tokens, style = inputs(text, args.voice, weights)
    row = {"system": system, "tokens": len(tokens)}
    if system == "tvm":
        from kokoro_tvm_ext.artifact_cache import ensure_artifact
        from kokoro_tvm_ext.runtime import KokoroTVM
        from kokoro_tvm_ext.runtime.artifact import read_meta

        artifact = ensure_artifact(weights)
        row["compile_seconds"] = read_meta(artifact)["compile_seconds"]
        tts = KokoroTVM(artifact)
        seconds, (audio, _) = timed(lambda: tts.synthesize(np.array(tokens), style), args.repeat)
        row["stages"] = tvm_stages(tts, tokens, style)
    elif system == "torch":
        import torch

        from kokoro_tvm_ext.assets import load_model

        torch.set_num_threads(args.threads)
        model = load_model(weights)
        ids = torch.tensor([[0, *tokens, 0]])
        ref_s = torch.from_numpy(style)
        with torch.no_grad():
            seconds, (audio, _) = timed(lambda: model.forward_with_tokens(ids, ref_s, 1.0), args.repeat)
            row["stages"] = torch_stages(model, ids, ref_s)
        audio = audio.numpy()
    else:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        path = onnx_model(system, weights, args)
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        feed = {"tokens": np.array([[0, *tokens, 0]], np.int64), "style": style, "speed": np.ones(1, np.float32)}
        seconds, (audio,) = timed(lambda: session.run(None, feed), args.repeat)
    audio_seconds = np.asarray(audio).size / 24000
    row.update(seconds=seconds, audio_seconds=audio_seconds, rtf=seconds / audio_seconds, peak_rss_mb=peak_rss_mb())
    return row


def tvm_stages(tts, tokens, style) -> dict:
    import numpy as np

    from kokoro_tvm_ext.runtime.noise import make_noise

    ids = np.array([[0, *tokens, 0]], np.int64)
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


def onnx_model(system: str, weights, args) -> Path:
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

        from onnx_fp32 import dequantized_model

        with atomic_write(fp32) as f:
            f.write(dequantized_model(onnx.load(str(int8))).SerializeToString())
    return fp32


# -- driver -----------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--voice", default="jf_alpha")
    parser.add_argument("--weights")
    parser.add_argument("--systems", nargs="+", default=SYSTEMS, choices=SYSTEMS)
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--worker", nargs=2, metavar=("SYSTEM", "TEXT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    set_threads(args.threads)
    if args.worker:
        print("ROW " + json.dumps(worker(args.worker[0], TEXTS[args.worker[1]], args)))
        return

    rows = []
    for key in TEXTS:
        for system in args.systems:
            cmd = [sys.executable, __file__, "--worker", system, key, "--threads", str(args.threads),
                   "--repeat", str(args.repeat), "--voice", args.voice] + (["--weights", args.weights] if args.weights else [])
            result = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            lines = [l for l in result.stdout.splitlines() if l.startswith("ROW ")]
            if result.returncode or not lines:
                print(f"{system} on {key} failed:\n{result.stderr[-1500:]}", file=sys.stderr)
                continue
            rows.append(json.loads(lines[-1][4:]))
            print(f"  measured {system} on the {key} text", file=sys.stderr, flush=True)

    print(machine_line(args.threads))
    table = []
    for r in rows:
        compile_s = f"{r['compile_seconds']:.0f}" if "compile_seconds" in r else ""
        table.append([r["system"], r["tokens"], f"{r['seconds']:.3f}", f"{r['audio_seconds']:.2f}",
                      f"{r['rtf']:.3f}", f"{r['peak_rss_mb']:.0f}", compile_s])
    print_table(["system", "tokens", "seconds", "audio s", "RTF", "peak RSS MB", "compile s"], table)
    print("\nper stage (seconds, medians):")
    stage_rows = [[r["system"], r["tokens"], name, f"{t:.3f}"] for r in rows for name, t in r.get("stages", {}).items()]
    print_table(["system", "tokens", "stage", "seconds"], stage_rows)
    if args.json:
        keep = ("system", "tokens", "seconds", "audio_seconds", "rtf", "peak_rss_mb", "compile_seconds", "snr_db")
        Path(args.json).write_text(json.dumps([{k: r[k] for k in keep if k in r} for r in rows],
                                              indent=2))


if __name__ == "__main__":
    main()
