"""Compiled artifacts cached per (weights, TVM, plugin, CPU), so `say` compiles once."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

# What decides the compiled code besides the weights: the compiler-side sources
# and the native library. Hashing them means an upgraded (or edited) plugin never
# reuses an artifact built by another version of itself.
_COMPILER_SOURCES = (
    "frontend",
    "legalize",
    "passes",
    "kokoro",
    "compile.py",
    "model_spec.py",
    "torch_lstm.py",
    "runtime/weights.py",
)


def compiler_fingerprint() -> str:
    from . import _native

    package = Path(__file__).parent
    files = [Path(_native.__file__)]
    for name in _COMPILER_SOURCES:
        path = package / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


def artifact_key(weights_fingerprint: str, lstm_impl: str = "plugin", precision: str = "fp32") -> str:
    """The cache entry's name. Computed without TVM's compiler (a cached artifact is found in
    milliseconds): TVM's version from the package metadata, the CPU from /proc/cpuinfo."""
    from . import __version__
    from ._versions import installed_versions
    from .runtime.cpu_features import host_cpu_id

    tvm_version = installed_versions()["apache-tvm"]
    key = (
        f"{weights_fingerprint[:24]}-tvm{tvm_version}-ext{__version__}-{compiler_fingerprint()}"
        f"-{host_cpu_id()}-{lstm_impl}"
    )
    return key if precision == "fp32" else f"{key}-{precision}"


def cached_artifact_dir(key: str) -> Path:
    from .assets.cache import cache_dir

    return cache_dir() / "artifacts" / key


def cached_problem(out_dir: Path) -> str | None:
    """Why the cached artifact in ``out_dir`` cannot be used (None if it can)."""
    from .errors import ArtifactError, ArtifactMissingError
    from .runtime.artifact import load_checked_meta

    try:
        load_checked_meta(out_dir)
    except ArtifactMissingError:
        return "missing"
    except (ArtifactError, OSError) as err:
        return str(err)
    return None


def ensure_artifact(
    resolved_weights, *, lstm_impl: str = "plugin", precision: str = "fp32", quiet: bool = False
) -> Path:
    """The artifact for these weights, compiling (once, atomically) if it is missing or damaged.
    ``resolved_weights`` may come from ``assets.weights.locate``: they are only built and
    loaded when there is something to compile."""
    from .assets.weights import load_model, materialize

    out = cached_artifact_dir(artifact_key(resolved_weights.fingerprint(), lstm_impl, precision))
    return ensure_compiled(
        out,
        lambda: load_model(materialize(resolved_weights)),
        lstm_impl=lstm_impl,
        precision=precision,
        weights_fingerprint=resolved_weights.fingerprint(),
        quiet=quiet,
    )


def ensure_compiled(
    out: Path,
    make_model,
    *,
    lstm_impl: str = "plugin",
    precision: str = "fp32",
    weights_fingerprint: str | None = None,
    quiet: bool = False,
) -> Path:
    """``out`` if it holds a sound artifact, else ``make_model()`` compiled into it (atomically)."""
    problem = cached_problem(out) if out.exists() else "missing"
    if problem is None:
        return out
    from .compile import compile_kokoro

    if problem != "missing":
        print(f"kokoro-tvm: the cached artifact cannot be used, compiling it again: {problem}", file=sys.stderr)
    elif not quiet:
        print(f"kokoro-tvm: compiling Kokoro for this CPU (once; a few minutes) into {out}", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Compiled into a temp dir beside the entry and renamed into place, so an
    # interrupted compile (Ctrl-C, a crash) never leaves a half-written entry.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        compile_kokoro(
            make_model(),
            tmp,
            lstm_impl=lstm_impl,
            precision=precision,
            weights_fingerprint=weights_fingerprint,
            quiet=quiet,
        )
        if out.exists():  # a concurrent compile finished first, or the damaged entry
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
