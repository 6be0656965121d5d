"""Compiled artifacts cached per (weights, TVM, plugin, CPU), so `say` compiles once."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .runtime.artifact import LIBRARY, META


def artifact_key(weights_fingerprint: str, lstm_impl: str = "plugin") -> str:
    import tvm
    from tvm.target import codegen

    from . import __version__

    cpu = codegen.llvm_get_system_cpu()
    return f"{weights_fingerprint[:24]}-tvm{tvm.__version__}-ext{__version__}-{cpu}-{lstm_impl}"


def cached_artifact_dir(key: str) -> Path:
    from .assets.cache import cache_dir

    return cache_dir() / "artifacts" / key


def is_complete(out_dir: Path) -> bool:
    return (out_dir / META).is_file() and (out_dir / LIBRARY).is_file()


def ensure_artifact(resolved_weights, *, lstm_impl: str = "plugin", quiet: bool = False) -> Path:
    """The artifact for these weights, compiling (once, atomically) if it is missing."""
    from .assets.weights import load_model
    from .compile import compile_kokoro

    out = cached_artifact_dir(artifact_key(resolved_weights.fingerprint(), lstm_impl))
    if is_complete(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model = load_model(resolved_weights)
        compile_kokoro(model, tmp, lstm_impl=lstm_impl, weights_fingerprint=resolved_weights.fingerprint(),
                       quiet=quiet)
        if out.exists():  # a concurrent compile finished first, or a broken leftover
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
