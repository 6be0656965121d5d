"""The peers that need a Python environment of their own: kokoro-pi and vox-tts.

kokoro-pi pins an onnxruntime other than the bench's, and vox-tts is a native engine
of its own; each gets a virtualenv under the user cache (``bench/venvs/``), made once
with uv (or venv + pip) from PyPI, and is built offline from our weights:

- **kokoro-pi** (float variant): its build's graph rewrites (instance norm, height-one
  2-D convolutions, squares, the fused Snake operator) applied to the fp32 ONNX graph
  of ``onnx_fp32.py``, with the operator library its wheel ships. Its own build
  downloads an upstream ONNX file instead; its int8 variant needs ARM's dot-product
  instructions. The worker feeds its ONNX Runtime session (``Kokoro(...).kokoro.sess``)
  the very tokens and style row the ONNX rows get.
- **vox-tts** (f32): ``vox.build_kokoro`` on hexgrad's layout (``kokoro-v1_0.pth``
  written from our weights, ``config.json``, the voice's pack); the converter reads
  the .pth with torch, so it runs in the bench's Python with vox on its path. The
  worker speaks the phonemes with the voice's speaker, seed 0.

``prepare`` runs in the bench's environment; ``build`` and ``worker`` in the peer's
(through ``workers.in_subprocess(..., python=...)``), so this module imports only the
standard library and numpy at the top. Anything that keeps a row from running here
(no network, no wheel for this Python, a failed build) is ``peers.Unavailable`` with
one line saying why.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kokoro_bench.peers import Unavailable
from kokoro_bench.workers import in_subprocess, measure


@dataclass(frozen=True)
class VenvPeer:
    requirements: tuple[str, ...]
    what: str  # for the table's note

    @property
    def venv_name(self) -> str:
        return "-".join(r.replace("==", "-") for r in self.requirements)


PEERS = {
    "kokoro-pi": VenvPeer(
        ("kokoro-pi==1.2.0",), "kokoro-pi 1.2.0 float (ONNX Runtime 1.30 + its rewrites, fused Snake)"
    ),
    "vox-tts": VenvPeer(("vox-tts==0.19.5",), "vox-tts 0.19.5 f32 (its own C++ kernels)"),
}
KOKORO_PI_LIBRARY = "libkokoro_pi_ops.so"


def bench_cache() -> Path:
    from kokoro_tvm_ext.support.cache import cache_dir

    return cache_dir() / "bench"


def one_line(stderr: str, limit: int = 300) -> str:
    """A tool's error output as one line: its non-empty lines joined, cut to ``limit`` characters."""
    text = " ".join(line.strip() for line in stderr.splitlines() if line.strip()) or "no error output"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def ensure_venv(name: str, requirements: tuple[str, ...] | list[str], root: Path) -> str:
    """The Python of ``root/name``, a virtualenv with ``requirements`` installed (made once; remade when
    the requirements change). Raises ``Unavailable`` with the installer's error when that fails."""
    venv = root / name
    python = venv / "bin" / "python"
    marker, wanted = venv / "requirements.txt", "\n".join(requirements) + "\n"
    if python.is_file() and marker.is_file() and marker.read_text() == wanted:
        return str(python)
    shutil.rmtree(venv, ignore_errors=True)
    if importlib.util.find_spec("uv"):
        uv = [sys.executable, "-m", "uv"]
        steps = [[*uv, "venv", "-q", "--python", sys.executable, str(venv)]]
        steps.append([*uv, "pip", "install", "-q", "--python", str(python), *requirements])
    else:
        steps = [[sys.executable, "-m", "venv", str(venv)], [str(python), "-m", "pip", "install", "-q", *requirements]]
    for what, cmd in zip(("create a virtualenv", "install " + " ".join(requirements)), steps):
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode:
            shutil.rmtree(venv, ignore_errors=True)
            raise Unavailable(f"cannot {what} ({one_line(result.stderr)})")
    marker.write_text(wanted)  # last: a half-made virtualenv is remade next time
    return str(python)


# -- in the bench's environment -----------------------------------------------------------


def prepare(system: str, weights_arg: str | None, voice: str, threads: int, root: Path | None = None) -> dict:
    """Make ``system``'s virtualenv and build its model from our weights (both cached); what its worker
    needs: ``python``, ``module`` and the built files."""
    peer = PEERS[system]
    root = root or bench_cache()
    python = ensure_venv(peer.venv_name, peer.requirements, root / "venvs")
    if system == "kokoro-pi":
        ready = {"models": str(_kokoro_pi_models(python, root, voice, threads))}
    else:
        ready = {"tmod": str(_vox_model(python, root, weights_arg, voice))}
    return {**ready, "python": python, "module": __name__, "note": peer.what}


def _kokoro_pi_models(python: str, root: Path, voice: str, threads: int) -> Path:
    import numpy as np

    from kokoro_bench.onnx_fp32 import onnx_model
    from kokoro_tvm_ext.speech import Voice

    models = root / f"kokoro-pi-1.2.0-float-{voice}"
    if (models / "models.json").is_file():
        return models
    models.mkdir(parents=True, exist_ok=True)
    with open(models / "voices-v1.0.bin", "wb") as f:  # kokoro-onnx's voices file: an npz of packs
        np.savez(f, **{voice: Voice.load(voice).pack.reshape(-1, 1, 256)})
    job = {"system": "kokoro-pi", "onnx": str(onnx_model("fp32")), "models": str(models), "voice": voice}
    _in_venv(python, "build", job, threads)
    return models


def _vox_model(python: str, root: Path, weights_arg: str | None, voice: str) -> Path:
    import tempfile

    import torch

    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.model.weights.files import normalize_state_dict, read_checkpoint
    from kokoro_tvm_ext.speech import Voice

    weights = find_weights(weights_arg)
    tmod = root / f"vox-tts-0.19.5-f32-{weights.fingerprint()}-{voice}.tmod"
    if tmod.is_file():
        return tmod
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        hexgrad = Path(tmp)  # hexgrad's Kokoro-82M layout
        state = normalize_state_dict(read_checkpoint(weights.ensure_file()), str(weights.path))
        torch.save(
            {head: {k: torch.from_numpy(v) for k, v in sub.items()} for head, sub in state.items()},
            hexgrad / "kokoro-v1_0.pth",
        )
        (hexgrad / "config.json").write_text(json.dumps(weights.config))
        (hexgrad / "voices").mkdir()
        torch.save(
            torch.from_numpy(Voice.load(voice).pack.reshape(-1, 1, 256).copy()), hexgrad / "voices" / f"{voice}.pt"
        )
        out = hexgrad / "kokoro.tmod"
        # vox's converter needs torch to read the .pth; torch lives here, vox in its virtualenv
        bootstrap = f"import sys; sys.path.append({site!r}); from vox.build_kokoro import main; main(sys.argv[1:])"
        argv = ["--model", str(hexgrad), "--dtype", "f32", "--no-g2p", "-o", str(out)]
        result = subprocess.run([sys.executable, "-c", bootstrap, *argv], capture_output=True, text=True)
        if result.returncode or not out.is_file():
            raise Unavailable(f"vox.build_kokoro failed ({one_line(result.stderr)})")
        out.replace(tmod)
    return tmod


def _in_venv(python: str, mode: str, job: dict, threads: int) -> dict:
    try:
        return in_subprocess(__name__, mode, job, threads, block_torch=False, python=python)
    except RuntimeError as err:
        last = str(err).strip().splitlines()[-1]  # the exception's message, after the traceback
        raise Unavailable(f"{job['system']} {mode} failed ({last})") from None


# -- in the peer's virtualenv ----------------------------------------------------------------


def build(job: dict) -> dict:
    """kokoro-pi's float model (its build's stages 2 and 3) from our fp32 ONNX graph, and its manifest."""
    import onnx
    from kokoro_pi import graph, paths

    models = Path(job["models"])
    library = paths.prebuilt_library()
    if library is None:
        raise RuntimeError("its wheel ships no operator library for this CPU")
    fused, counts = graph.optimise(onnx.load(job["onnx"]))
    onnx.save(fused, str(models / "kokoro-fused.onnx"))
    shutil.copyfile(library, models / KOKORO_PI_LIBRARY)
    manifest = {
        "kokoro_pi": 1,
        "voice": job["voice"],
        "variant": "float",
        "variants": {
            "float": {"model": "kokoro-fused.onnx", "custom_ops": [KOKORO_PI_LIBRARY], "backend": "float-fused"}
        },
        "checksums": {},
        "build": {"rewrites": counts, "source": job["onnx"]},
    }
    (models / "models.json").write_text(json.dumps(manifest, indent=1))  # last: marks a finished build
    return {"rewrites": counts}


def worker(job: dict) -> dict:
    """The row for the table: ``job``'s peer timed on its input (as ``e2e.worker`` does ours)."""
    import time

    import numpy as np

    data = np.load(job["inputs"])
    threads, row = job["threads"], {"system": job["system"], "tokens": int(data["tokens"].size), "noise": "own"}
    start = time.perf_counter()
    if job["system"] == "kokoro-pi":
        from kokoro_pi import Kokoro

        kokoro = Kokoro(job["models"], variant="float", threads=threads, verify=False, warm=False)
        feed = {"tokens": data["ids"], "style": data["style"], "speed": np.ones(1, np.float32)}
        session = kokoro.kokoro.sess

        def call():
            return session.run(None, feed)[0]
    else:
        import vox

        engine = vox.Engine(job["tmod"], device="cpu", threads=threads)
        voice, phonemes = engine.speaker_voice(str(data["voice"])), str(data["phonemes"])

        def call():
            return engine.synthesize(phonemes, voice, phonemes=True, seed=0)

    setup = time.perf_counter() - start
    row.update(measure(call, job["repeat"], job["sample_rate"], job.get("audio_out")))
    row["compile_seconds"] = setup + max(row.pop("first_call_seconds") - row["seconds"], 0.0)
    row["note"] = job.get("note", "")
    return row


def main(argv: list[str] | None = None) -> int:
    """``--build JSON`` or ``--worker JSON``: one job; prints ``RESULT <json>`` (see ``workers``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build")
    parser.add_argument("--worker")
    args = parser.parse_args(argv)
    result = build(json.loads(args.build)) if args.build else worker(json.loads(args.worker))
    print("RESULT " + json.dumps(result))
    return 0
