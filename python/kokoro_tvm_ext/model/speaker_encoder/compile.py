"""The encoder's compiled artifact: its network (network.py) through stock ``tvm.compile`` with the plugin's CPU
pipeline, cached per (weights, TVM, plugin, this code, CPU) in ``<cache>/artifacts/speaker-encoder-<key>/``:
``encoder.so`` (weights inside) and ``meta.json``.

The key is Kokoro's (model/artifact_cache.py: ``library_key``) plus a hash of this package's files that make the
library, which Kokoro's key leaves out (editing the encoder does not recompile Kokoro); the cross-process lock is
Kokoro's too, taken on the encoder's own cache directory (a Kokoro compile takes minutes, this one seconds). The
compile needs TVM's compiler in this process; where TVM was imported runtime-only (a ``KokoroTVM`` loaded first),
it runs in a child process: ``python -m`` this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.model.artifact_cache import _one_compile_at_a_time, cached_artifact_dir, library_key
from kokoro_tvm_ext.model.compile import default_target
from kokoro_tvm_ext.model.runtime.cpu_features import host_arch, target_features
from kokoro_tvm_ext.model.runtime.tvm_runtime import compiler_available
from kokoro_tvm_ext.model.speaker_encoder.weights import PT_SHA256, load_weights, weights_file
from kokoro_tvm_ext.plugin.native_log import quiet_harmless_warnings
from kokoro_tvm_ext.support.cache import Progress, atomic_directory
from kokoro_tvm_ext.support.errors import ArtifactError
from kokoro_tvm_ext.support.file_hash import file_sha256
from kokoro_tvm_ext.support.torch_free import torch_hidden

LIBRARY = "encoder.so"
META = "meta.json"


# The files of this package that decide the compiled library (the front end runs in numpy, outside it).
COMPILER_FILES = ("spec.py", "network.py", "compile.py")


def package_fingerprint() -> str:
    """A hash of :data:`COMPILER_FILES`."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in COMPILER_FILES:
        digest.update(name.encode() + b"\0" + (here / name).read_bytes())
    return digest.hexdigest()[:12]


def artifact_dir() -> Path:
    return cached_artifact_dir(f"speaker-encoder-{PT_SHA256[:12]}-{package_fingerprint()}-{library_key()}")


def compile_encoder(weights: dict, out_dir: Path) -> Path:
    """Compile the network with ``weights`` for this machine's CPU into ``out_dir`` (library, then meta.json)."""
    with torch_hidden():  # TVM's FFI would load torch (1.5 s, 500 MB) if it is installed; nothing here uses it
        import tvm

    from kokoro_tvm_ext.model.speaker_encoder.network import build_module
    from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline

    target_dict = default_target()
    target = tvm.target.Target(target_dict)
    with quiet_harmless_warnings():
        exe = tvm.compile(build_module(weights), target=target, relax_pipeline=cpu_pipeline(target))
        exe.export_library(str(out_dir / LIBRARY))
    meta = {
        "model": "resemblyzer-0.1.4",
        "weights_sha256": PT_SHA256,
        "kokoro_tvm_ext": _native.__version__,
        "tvm": tvm.__version__,
        "target": target_dict,
        "arch": host_arch(),
        "cpu_features": target_features(target),
        "library_sha256": file_sha256(out_dir / LIBRARY),
    }
    (out_dir / META).write_text(json.dumps(meta, indent=2, sort_keys=True))
    return out_dir


def read_meta(out_dir: Path) -> dict:
    """The artifact's meta.json, its library's sha256 checked; ArtifactError naming the fix otherwise."""
    try:
        meta = json.loads((out_dir / META).read_text())
        sound = isinstance(meta, dict) and meta.get("library_sha256") == file_sha256(out_dir / LIBRARY)
    except (OSError, ValueError) as err:
        raise ArtifactError(f"the speaker encoder's artifact {out_dir} is damaged ({err}); delete it") from None
    if not sound:
        raise ArtifactError(f"the speaker encoder's library in {out_dir} is altered or damaged; delete {out_dir}")
    return meta


def _sound(out: Path) -> bool:
    """Whether ``out`` holds a usable artifact (a missing, damaged or altered one is compiled again)."""
    if not (out / META).is_file():
        return False
    try:
        read_meta(out)
    except ArtifactError:
        return False
    return True


def ensure_encoder_artifact(progress: Progress | None = None) -> Path:
    """The cached artifact's directory, compiled first if needed (once, atomically, one process at a time)."""
    out = artifact_dir()
    if _sound(out):
        return out
    progress = progress or Progress()
    weights = load_weights(progress=progress)  # fetched here, with its own progress line, not in a child
    # Locked apart from Kokoro's entries (their compiles take minutes; this one seconds).
    lock = weights_file().parent
    lock.mkdir(parents=True, exist_ok=True)
    with _one_compile_at_a_time(lock, quiet=False):
        if _sound(out):  # another process compiled it while this one waited
            return out
        with progress.step("compiling the speaker encoder for this CPU (once)"):
            with atomic_directory(out) as tmp:
                if compiler_available():
                    compile_encoder(weights, tmp)
                else:
                    _compile_in_child(tmp)
    return out


def _compile_in_child(out_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kokoro_tvm_ext.model.speaker_encoder.compile", str(out_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if result.returncode != 0:
        tail = " ".join(result.stderr.strip().splitlines()[-2:])
        raise ArtifactError(f"compiling the speaker encoder failed: {tail}")


if __name__ == "__main__":  # the child of _compile_in_child: a process where TVM's compiler loads
    compile_encoder(load_weights(), Path(sys.argv[1]))
