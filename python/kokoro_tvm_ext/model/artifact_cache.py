"""Compiled artifacts cached per (weights, TVM, plugin, CPU), so `say` compiles once.

One compiled library serves every checkpoint of Kokoro's shapes (model/checkpoint.py). The entry for a
set of weights comes from, in order: the cache (compiled or bound here before); any entry of the
library compiled on this machine (same TVM, plugin, CPU, options), by binding the weights to it in
seconds; the best installed prebuilt library (model/prebuilt.py), bound the same way into an entry of
its own, so a later `kokoro-tvm compile` for this CPU is preferred to it; a compile, when the compiler
is installed (else a one-line error naming what to install).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import sys
from pathlib import Path

# What decides the compiled code besides the weights: every file of the plugin and model
# layers (converters, passes, kernel interfaces, adapters, compile, runtime) and the native
# library. Hashing them all means an upgraded or edited plugin never reuses an artifact built
# by another version of itself, and a new file needs no list kept by hand.
COMPILER_LAYERS = ("plugin", "model")


def compiler_files(package: Path | None = None) -> list[Path]:
    """The files whose bytes key a compiled artifact, in a stable order (caches excluded)."""
    package = package or Path(__file__).resolve().parents[1]
    files = []
    for layer in COMPILER_LAYERS:
        files += sorted(f for f in (package / layer).rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    return files


def compiler_fingerprint(package: Path | None = None) -> str:
    import kokoro_tvm_ext._native as _native

    package = package or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(Path(_native.__file__).read_bytes())
    for f in compiler_files(package):
        digest.update(str(f.relative_to(package)).encode() + b"\0")
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


def library_key(lstm_impl: str = "plugin", precision: str = "fp32") -> str:
    """What decides the compiled library, weights aside. Computed without TVM's compiler (a cached
    artifact is found in milliseconds): TVM's version from the package metadata, the CPU from /proc/cpuinfo."""
    from kokoro_tvm_ext._native import __version__
    from kokoro_tvm_ext._versions import installed_versions
    from kokoro_tvm_ext.model.runtime.cpu_features import host_cpu_id

    tvm_version = installed_versions()["apache-tvm"]
    key = f"tvm{tvm_version}-ext{__version__}-{compiler_fingerprint()}-{host_cpu_id()}-{lstm_impl}"
    return key if precision == "fp32" else f"{key}-{precision}"


def artifact_key(weights_fingerprint: str, lstm_impl: str = "plugin", precision: str = "fp32") -> str:
    """The cache entry's name: the weights' fingerprint, then :func:`library_key`."""
    return f"{weights_fingerprint[:24]}-{library_key(lstm_impl, precision)}"


def same_library(out: Path, lstm_impl: str, precision: str) -> Path | None:
    """A sound entry beside ``out`` compiled the same way (for other weights), else None."""
    suffix = "-" + library_key(lstm_impl, precision)
    if not out.parent.is_dir():
        return None
    for entry in sorted(out.parent.iterdir()):
        if entry != out and entry.name.endswith(suffix) and not entry.name.startswith("."):
            if cached_problem(entry) is None:
                return entry
    return None


def cached_artifact_dir(key: str) -> Path:
    from kokoro_tvm_ext.support.cache import cache_dir

    return cache_dir() / "artifacts" / key


def cached_problem(out_dir: Path) -> str | None:
    """Why the cached artifact in ``out_dir`` cannot be used (None if it can)."""
    from kokoro_tvm_ext.errors import ArtifactError, ArtifactMissingError
    from kokoro_tvm_ext.model.runtime.artifact import load_checked_meta

    try:
        load_checked_meta(out_dir)
    except ArtifactMissingError:
        return "missing"
    except (ArtifactError, OSError) as err:
        return str(err)
    return None


@contextlib.contextmanager
def _one_compile_at_a_time(directory: Path, quiet: bool):
    """An exclusive lock on the cache directory, across processes (two `say` commands, test workers): the
    second waits, then finds the first's entry instead of compiling it again. Released when the holder exits,
    however it exits."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"kokoro-tvm: waiting for another process compiling into {directory}", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# The packages a compile needs beyond the runtime (the `compile` extra).
COMPILER_MODULES = ("torch", "kokoro")


def compiler_installed() -> bool:
    return all(importlib.util.find_spec(module) is not None for module in COMPILER_MODULES)


def ensure_compiled(
    out: Path,
    make_model,
    *,
    checkpoint=None,
    lstm_impl: str = "plugin",
    precision: str = "fp32",
    weights_fingerprint: str | None = None,
    quiet: bool = False,
    prebuilt: bool = True,
) -> Path:
    """The artifact for ``out``'s weights. ``out`` if it holds a sound artifact; else, given ``checkpoint``
    (a callable returning the weights as KModel's flat state-dict names -> arrays): the weights bound to
    an entry of the same library beside ``out``, else (if ``prebuilt``) to the best installed prebuilt
    library, into an entry beside ``out`` named after it (returned); else ``make_model()`` compiled into
    ``out``. Atomic either way; a missing compiler is a one-line ``ArtifactMissingError``."""
    if out.exists() and cached_problem(out) is None:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with _one_compile_at_a_time(out.parent, quiet):
        problem = cached_problem(out) if out.exists() else "missing"
        if problem is None:  # another process made it while this one waited
            return out
        base = same_library(out, lstm_impl, precision) if checkpoint is not None else None
        if base is not None:
            _bind_into(out, base, checkpoint, weights_fingerprint, quiet)
            return out
        found = None
        if checkpoint is not None and prebuilt:
            from kokoro_tvm_ext.model.prebuilt import best_prebuilt

            found = best_prebuilt(lstm_impl, precision)
            if found.directory is not None:
                entry = out.with_name(f"{out.name}-{found.key}")
                if not entry.exists() or cached_problem(entry) is not None:
                    _bind_into(entry, found.directory, checkpoint, weights_fingerprint, quiet)
                return entry
        if not compiler_installed():
            raise _no_compiler(found)
        _compile_into(out, problem, make_model, lstm_impl, precision, weights_fingerprint, quiet)
    return out


def _no_compiler(found) -> Exception:
    """What to install when there is neither a library for this CPU nor a compiler to make one."""
    from kokoro_tvm_ext._native import __version__
    from kokoro_tvm_ext.errors import ArtifactMissingError
    from kokoro_tvm_ext.model.prebuilt import DISTRIBUTION

    refused = found.refused if found is not None else ()
    passed_over = f" (the installed prebuilt libraries do not fit: {'; '.join(refused)})" if refused else ""
    return ArtifactMissingError(
        f"no compiled Kokoro for this CPU{passed_over} and no compiler to make one: install the prebuilt "
        f'libraries (pip install "{DISTRIBUTION}=={__version__}") or the compiler (pip install '
        '"kokoro-tvm-ext[compile]")'
    )


def _bind_into(out: Path, base: Path, checkpoint, weights_fingerprint, quiet) -> None:
    from kokoro_tvm_ext.model.checkpoint import bind_checkpoint
    from kokoro_tvm_ext.support.cache import Progress

    state = checkpoint()  # first: building the default weights reports its own steps
    message = f"binding the weights to the compiled Kokoro in {base} (no compile)"
    with contextlib.nullcontext() if quiet else Progress().step(message):
        bind_checkpoint(base, state, out, weights_fingerprint)


def _compile_into(out: Path, problem: str, make_model, lstm_impl, precision, weights_fingerprint, quiet) -> None:
    from kokoro_tvm_ext.model.compile import compile_kokoro

    if problem != "missing":
        print(f"kokoro-tvm: the cached artifact cannot be used, compiling it again: {problem}", file=sys.stderr)
    elif not quiet:
        print(f"kokoro-tvm: compiling Kokoro for this CPU (once; a few minutes) into {out}", file=sys.stderr)
    # Compiled into a temp dir beside the entry and renamed into place, so an
    # interrupted compile (Ctrl-C, a crash) never leaves a half-written entry.
    from kokoro_tvm_ext.support.cache import atomic_directory

    with atomic_directory(out) as tmp:
        compile_kokoro(
            make_model(),
            tmp,
            lstm_impl=lstm_impl,
            precision=precision,
            weights_fingerprint=weights_fingerprint,
            quiet=quiet,
        )
