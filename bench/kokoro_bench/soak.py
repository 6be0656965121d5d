"""Soak: many syntheses of random lengths, voices and speeds; memory and speed over time.

Users don't repeat one input: a server sees every length from 1 to 510 tokens. Every
system here runs the same sequence of calls (lengths uniform in 1..--max-tokens, cut from
one phonemized passage; a random voice and speed per call; noise seed = call number),
each system in a fresh process, with the same thread count, each call the phonemes planned by
``Speaker.plan`` (the pipeline every front end uses) and synthesized as one call. Reported per system: resident
memory (VmRSS) after 10 and 100 calls and after the last, the drift from call 100 to the
last, peak memory (VmHWM), and compute time per second of audio over the whole run.

Rows:
  tvm         our artifact as shipped (KokoroTVM's default: TVM's naive allocator)
  tvm-pooled  the same artifact on TVM's pooled allocator, KokoroTVM's old default, which
              keeps a buffer for every distinct size it has seen
  torch       hexgrad's KModel, eager, fed our noise (TorchKokoro, as `serve --backend torch`)

Target (issue 23): tvm's RSS after 1,000 calls within 5% of its RSS after 100; speed as
tvm-pooled's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from kokoro_bench.plans import as_one_call, spoken_phonemes
from kokoro_bench.workers import add_row_arguments, in_subprocess, job_main, peak_rss_mb, rss_mb
from kokoro_tvm_ext.model.spec import MAX_TOKENS, SAMPLE_RATE

SYSTEMS = ["tvm", "tvm-pooled", "torch"]
ALLOCATOR = {"tvm": "naive", "tvm-pooled": "pooled"}
# About 700 phonemes of ordinary prose, so that any window of up to 510 is real speech.
PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father had "
    "taught him. There were one hundred and twelve of them, worn smooth in the middle by a century of boots. "
    "At the top he trimmed the wick, polished the great lens and watched the ships come round the headland, "
    "their lanterns swaying like fireflies over the dark water. Some nights the fog rolled in so thick that "
    "he could not see his own hands, and then he wound the horn and sounded it every half minute until dawn. "
    "Sailors in the harbour town said they could set their clocks by him. He never married, though he wrote "
    "long letters to a woman in the city, letters full of weather and birds and the colour of the sea in "
    "winter. When the light was finally automated, he kept the key to the door on a string around his neck, "
    "and on clear evenings he still walked out to the point to watch the beam sweep across the waves."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=1000, help="syntheses per system (default: %(default)s)")
    parser.add_argument(
        "--torch-calls",
        type=int,
        metavar="N",
        help="run only the first N calls on torch, ~3x slower than tvm (default: --calls)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help="lengths are uniform in 1..this many tokens (default: %(default)s)",
    )
    add_row_arguments(parser, SYSTEMS)
    parser.add_argument("--seed", type=int, default=0, help="seed of the call sequence (default: 0)")
    parser.add_argument(
        "--rss-cap-mb",
        type=float,
        default=12000,
        help="stop a system's loop early once its RSS passes this (tvm-pooled grows without "
        "bound; default: %(default)s)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")


def make_calls(path: Path, passage: str, voices: list[str], calls: int, max_tokens: int, seed: int) -> None:
    """The call sequence every system runs: windows of ``passage`` (phonemes, one token per
    character), voice names, speeds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_tokens + 1, calls)
    starts = []
    for n in lengths:
        start = int(rng.integers(0, len(passage) - n + 1))
        while not passage[start : start + n].strip():  # a window of spaces says nothing: the next one
            start += 1
        starts.append(start)
    np.savez(
        path,
        passage=np.array(passage),
        lengths=lengths,
        starts=np.array(starts),
        voices=np.array([voices[i] for i in rng.integers(0, len(voices), calls)]),
        speeds=rng.uniform(0.8, 1.4, calls).astype(np.float32),
    )


def worker(job: dict) -> dict:
    """Run the whole call sequence on one system; checkpoints of memory and time."""
    import numpy as np

    from kokoro_tvm_ext.speech import Speaker, Voice

    calls = np.load(job["calls"])
    passage = str(calls["passage"])
    voices = {name: Voice.load(name) for name in sorted(set(calls["voices"].tolist()))}
    if job["system"] in ALLOCATOR:
        from kokoro_tvm_ext.model.runtime import KokoroTVM

        speaker = Speaker(KokoroTVM(job["artifact"], allocator=ALLOCATOR[job["system"]]))
    else:
        from kokoro_tvm_ext.model.adapters.reference import TorchKokoro
        from kokoro_tvm_ext.model.weights import load_kmodel

        speaker = Speaker(TorchKokoro(load_kmodel(job["weights"]), num_threads=job["threads"]))

    n = min(len(calls["lengths"]), job["calls_limit"])
    marks = {10, 100, n} | set(range(100, n + 1, 100))
    checkpoints, compute, audio_seconds = {}, 0.0, 0.0
    for i in range(n):
        start, length = int(calls["starts"][i]), int(calls["lengths"][i])
        phonemes, voice = passage[start : start + length], voices[str(calls["voices"][i])]
        began = time.perf_counter()
        # One call of the window's every token (as_one_call), not one per sentence: the soak feeds every length.
        plan = speaker.plan(phonemes=phonemes, voice=voice, speed=float(calls["speeds"][i]), seed=i)
        audio, _ = next(speaker.synthesize([as_one_call(plan)]))
        compute += time.perf_counter() - began
        audio_seconds += audio.size / SAMPLE_RATE
        rss, done = rss_mb(), i + 1
        if done in marks or rss > job["rss_cap_mb"]:
            checkpoints[done] = rss
            print(
                f"  {job['system']}: {done}/{n} calls, RSS {rss:.0f} MB, {compute / audio_seconds:.3f} s per audio s",
                file=sys.stderr,
                flush=True,
            )
        if rss > job["rss_cap_mb"]:
            break
    return {
        "system": job["system"],
        "calls": done,
        "rss_mb": checkpoints,
        "peak_rss_mb": peak_rss_mb(),
        "seconds": compute,
        "audio_seconds": audio_seconds,
        "stopped_early": done < n,
    }


def prepare(job: dict) -> dict:
    from kokoro_tvm_ext.model.weights import find_weights

    weights = find_weights(job["weights"])
    if job["system"] in ALLOCATOR:
        from kokoro_tvm_ext.model.artifact_cache import ensure_artifact

        return {"artifact": str(ensure_artifact(weights))}
    return {"weights": str(weights.ensure_file())}


def run(args) -> int:
    from kokoro_bench.table import machine_line, print_table
    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.speech import Voice, list_voices

    bad_torch_calls = args.torch_calls is not None and args.torch_calls < 1
    if args.calls < 1 or not 1 <= args.max_tokens <= MAX_TOKENS or bad_torch_calls:
        raise SystemExit(f"soak: --calls and --torch-calls must be >= 1 and --max-tokens in 1..{MAX_TOKENS}")
    weights = find_weights(args.weights)
    vocab = weights.config["vocab"]
    # The passage's plan (English: any pack speaks the same phonemes), kept to a token per character.
    phonemes = spoken_phonemes(PASSAGE, Voice.silent("passage", "a"), vocab)
    passage = "".join(c for c in phonemes if c in vocab)
    voices = [v.name for v in list_voices()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        calls = Path(tmp) / "calls.npz"
        make_calls(calls, passage, voices, args.calls, args.max_tokens, args.seed)
        for system in args.systems:
            print(f"preparing {system}", file=sys.stderr, flush=True)
            ready = in_subprocess(
                __name__, "prepare", {"system": system, "weights": args.weights}, args.threads, block_torch=False
            )
            limit = args.torch_calls if system == "torch" and args.torch_calls else args.calls
            job = {
                **ready,
                "system": system,
                "calls": str(calls),
                "calls_limit": limit,
                "threads": args.threads,
                "rss_cap_mb": args.rss_cap_mb,
            }
            rows.append(
                in_subprocess(__name__, "worker", job, args.threads, block_torch=system != "torch", show_progress=True)
            )

    def at(row, k):
        return row["rss_mb"].get(str(k), row["rss_mb"].get(k))

    print(machine_line(args.threads))
    print(f"{args.calls} calls per system, 1..{args.max_tokens} tokens, voices: {', '.join(voices)}")
    table = []
    for r in rows:
        last, hundred = at(r, r["calls"]), at(r, 100)
        drift = f"{100 * (last / hundred - 1):+.1f}%" if hundred else ""
        calls = f"{r['calls']} (RSS cap)" if r["stopped_early"] else r["calls"]
        table.append(
            [
                r["system"],
                calls,
                f"{at(r, 10):.0f}" if at(r, 10) else "",
                f"{hundred:.0f}" if hundred else "",
                f"{last:.0f}",
                drift,
                f"{r['peak_rss_mb']:.0f}",
                f"{r['audio_seconds']:.0f}",
                f"{r['seconds'] / r['audio_seconds']:.3f}",
            ]
        )
    print_table(
        [
            "system",
            "calls",
            "RSS@10 MB",
            "RSS@100 MB",
            "RSS@last MB",
            "drift 100->last",
            "peak MB",
            "audio s",
            "s per audio s",
        ],
        table,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return job_main(__doc__, add_arguments, prepare, worker, run, argv)


if __name__ == "__main__":
    sys.exit(main())
