"""A HiFi-GAN generator (conv1d TTS vocoder, tests/vocoder/hifigan.py) on stock TVM, with and without
our kernels, against PyTorch eager and torch.compile: one table from one run.

Mel -> audio at 22050 Hz, hop 256 (86 mel frames per second of audio), batch 1, random weights
(make_generator, seed 0) and a random mel. Every TVM row is TVM's own path, no converters of ours:
torch.export with a symbolic mel length -> tvm.relax.frontend.torch.from_exported_program ->
tvm.compile(mod, target) (the default Relax pipeline), one build for every length.

Rows:
  stock     stock TVM
  plugin    the same, compiled inside ``kokoro_tvm_ext.kernels_enabled()``: our Rust kernels take
            relax.nn.conv1d / conv1d_transpose
  eager     PyTorch eager (torch.no_grad)
  inductor  torch.compile(dynamic=True), inductor; its compile seconds are its first call's time
            minus its median at each length, summed over the lengths so far (a new length may
            compile again)

Columns: median seconds of --repeat runs after one warm-up; RTF = seconds / audio seconds; speed vs
eager (eager's seconds / the row's: 2.0x = twice as fast); compile seconds (TVM: import + build, once
for every length); the audio's max |row - eager| / max |eager|. Stock TVM's untuned convolutions run on one
thread (the same time at --threads 1 and 2): at lengths over --stock-once-above seconds of audio
it runs once, without a warm-up.

--config: v2 (default; the HiFi-GAN paper's V2: V1's layers at width 128, ~1/16 of V1's work), v1
(width 512: stock TVM takes ~67 s per second of audio, so its 10 s cell would take ~11 min; run it
with --stock-skip-above 1), or small (64, the tests' config).

Usage: python bench/vocoder.py [--config v2] [--seconds 1 10] [--threads 2] [--repeat 5]
       [--systems stock plugin eager inductor] [--stock-once-above 5] [--stock-skip-above S] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from kokoro_bench.table import machine_line, print_table, set_threads
from kokoro_bench.timing import timed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "vocoder"))
from hifigan import CONFIGS, make_generator, random_mel  # noqa: E402

SAMPLE_RATE = 22050
SYSTEMS = ["stock", "plugin", "eager", "inductor"]
JSON_KEYS = ("config", "system", "audio_seconds", "frames", "seconds", "runs", "rtf", "compile_seconds", "rel_err")


def frames_for(seconds: float, hop: int) -> int:
    return round(seconds * SAMPLE_RATE / hop)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="v2", help="generator size (default: v2)")
    parser.add_argument("--seconds", type=float, nargs="+", default=[1.0, 10.0], help="audio lengths (default: 1 10)")
    parser.add_argument("--threads", type=int, default=2, help="threads for every system (default: 2)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per cell, after one warm-up (default: 5)")
    parser.add_argument(
        "--stock-once-above",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="stock TVM runs once, without warm-up, on audio longer than this (default: 5)",
    )
    parser.add_argument(
        "--stock-skip-above",
        type=float,
        metavar="SECONDS",
        help="leave stock TVM out on audio longer than this (default: run every length)",
    )
    parser.add_argument("--systems", nargs="+", default=SYSTEMS, choices=SYSTEMS, metavar="SYSTEM")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")
    args = parser.parse_args(argv)
    set_threads(args.threads)  # before TVM and torch start their thread pools
    # A fresh inductor cache, so its compile time is a first compile's, as a new user's (a warm
    # on-disk cache took it from ~55 s to ~8 s for v2).
    cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache.name

    import numpy as np
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    import kokoro_tvm_ext
    from kokoro_tvm_ext.model.compile import default_target

    torch.set_num_threads(args.threads)
    config = CONFIGS[args.config]
    model = make_generator(config, seed=0)
    lengths = [(s, frames_for(s, config.hop_length)) for s in args.seconds]
    mels = {frames: random_mel(frames, config.n_mels, seed=frames) for _, frames in lengths}
    with torch.no_grad():
        reference = {frames: model(mel).numpy() for frames, mel in mels.items()}
    print(f"HiFi-GAN {args.config} ({config.upsample_initial_channel} channels); {load()}", file=sys.stderr)

    def rel_err(audio) -> float:
        want = reference[audio.shape[-1] // config.hop_length]
        return float(np.abs(audio - want).max() / np.abs(want).max())

    rows = []

    def add(system, seconds, frames, median, runs, compile_seconds, audio):
        rows.append(
            {
                "config": args.config,
                "system": system,
                "audio_seconds": frames * config.hop_length / SAMPLE_RATE,
                "frames": frames,
                "seconds": median,
                "runs": runs,
                "rtf": median / (frames * config.hop_length / SAMPLE_RATE),
                "compile_seconds": compile_seconds,
                "rel_err": rel_err(audio),
            }
        )
        print(f"  {system} {seconds:g} s: {median:.3f} s ({runs} runs); {load()}", file=sys.stderr, flush=True)

    tvm_systems = [s for s in ("plugin", "stock") if s in args.systems]  # the plugin first: it fails fast if at all
    if tvm_systems:
        dim = torch.export.Dim("frames", min=4, max=max(frames for _, frames in lengths) + 1)
        exported = torch.export.export(model, (random_mel(32, config.n_mels),), dynamic_shapes=({2: dim},))
        target = tvm.target.Target(default_target())
    for system in tvm_systems:
        print(f"building {system}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        mod = from_exported_program(exported, keep_params_as_input=False)
        if system == "plugin":
            with kokoro_tvm_ext.kernels_enabled():
                exe = tvm.compile(mod, target=target)
        else:
            exe = tvm.compile(mod, target=target)
        compile_seconds = time.perf_counter() - start
        vm = relax.VirtualMachine(exe, tvm.cpu())
        for seconds, frames in lengths:
            if system == "stock" and args.stock_skip_above is not None and seconds > args.stock_skip_above:
                print(f"  stock {seconds:g} s: left out (--stock-skip-above)", file=sys.stderr)
                continue
            mel = tvm.runtime.tensor(mels[frames].numpy())
            runs = 1 if system == "stock" and seconds > args.stock_once_above else args.repeat
            median, out = timed(lambda mel=mel, vm=vm: vm["main"](mel), runs, warmup=int(runs > 1))
            audio = out.numpy() if isinstance(out, tvm.runtime.Tensor) else out[0].numpy()
            add(system, seconds, frames, median, runs, compile_seconds, audio)

    if "eager" in args.systems:
        for seconds, frames in lengths:
            with torch.no_grad():
                median, _ = timed(lambda mel=mels[frames]: model(mel), args.repeat)
            add("eager", seconds, frames, median, args.repeat, None, reference[frames])

    if "inductor" in args.systems:
        print("compiling inductor", file=sys.stderr, flush=True)
        compiled = torch.compile(model, dynamic=True)
        compile_seconds = 0.0
        for seconds, frames in lengths:
            with torch.no_grad():
                start = time.perf_counter()
                audio = compiled(mels[frames]).numpy()
                first = time.perf_counter() - start
                median, _ = timed(lambda mel=mels[frames]: compiled(mel), args.repeat, warmup=0)
            compile_seconds += max(first - median, 0.0)
            add("inductor", seconds, frames, median, args.repeat, compile_seconds, audio)

    rows.sort(key=lambda r: (SYSTEMS.index(r["system"]), r["frames"]))
    eager = {r["frames"]: r["seconds"] for r in rows if r["system"] == "eager"}
    print(machine_line(args.threads) + f"; {load()}")
    print(
        f"HiFi-GAN {args.config} ({config.upsample_initial_channel} channels, hop {config.hop_length}, "
        f"{SAMPLE_RATE} Hz), batch 1; medians of {args.repeat} runs unless runs says otherwise"
    )
    print_table(
        ["system", "audio s", "median s", "runs", "RTF", "speed vs eager", "compile s", "max err / max |eager|"],
        [
            [
                r["system"],
                f"{r['audio_seconds']:.2f}",
                f"{r['seconds']:.3f}",
                r["runs"],
                f"{r['rtf']:.3f}",
                f"{eager[r['frames']] / r['seconds']:.2f}x" if r["frames"] in eager else "",
                "" if r["compile_seconds"] is None else f"{r['compile_seconds']:.1f}",
                f"{r['rel_err']:.1e}",
            ]
            for r in rows
        ],
    )
    if args.json:
        Path(args.json).write_text(json.dumps([{k: r[k] for k in JSON_KEYS} for r in rows], indent=2))
    cache.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
