"""Compiled artifacts cached per (weights, TVM, plugin, target), so `say` compiles once: :func:`ensure_artifact`.

One compiled library serves every checkpoint of Kokoro's shapes (model/binding.py). The entry for a
set of weights comes from, in order: the cache (compiled or bound here before); any entry of the
library compiled here for the same target (same TVM, plugin, options), by binding the weights to it in
seconds; for this machine's CPU, the best installed prebuilt library (model/prebuilt.py), bound the same
way into an entry of its own, so a later `kokoro-tvm compile` for this CPU is preferred to it; a compile,
when the compiler is installed (else a one-line error naming what to install).

The target is this machine's CPU unless one is named: an LLVM CPU name (``x86-64-v3``, ``cortex-a76``, a
generic ARM level such as ``armv8.2-a+dotprod``) or a TVM target dict (``{"kind": "llvm", "mtriple":
"aarch64-linux-gnu", "mcpu": "cortex-a76"}``), which keys the entry in place of this CPU's id and is what
``compile_kokoro`` compiles for. A target of another architecture (aarch64 on an x86-64 machine) is
cross-compiled into a library-only entry (``library-<key>``): its weights are bound on a machine that runs it,
where ``ensure_artifact(weights, artifact=that directory)`` (``kokoro-tvm say --artifact DIR``) binds them
into that machine's cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.model.binding import bind_checkpoint
from kokoro_tvm_ext.model.compile import compile_kokoro, cross_compiler
from kokoro_tvm_ext.model.prebuilt import DISTRIBUTION, best_prebuilt
from kokoro_tvm_ext.model.runtime.artifact import holds_checkpoint, load_checked_meta, read_meta
from kokoro_tvm_ext.model.runtime.cpu_features import (
    check_cpu,
    host_arch,
    host_cpu_id,
    host_features,
    precision_here,
    target_arch,
)
from kokoro_tvm_ext.model.runtime.tvm_runtime import compiler_available
from kokoro_tvm_ext.model.weights import Weights, find_weights, load_kmodel
from kokoro_tvm_ext.model.weights.files import check_fits, read_checkpoint
from kokoro_tvm_ext.support.cache import Progress, atomic_directory, cache_dir
from kokoro_tvm_ext.support.errors import ArtifactError, ArtifactMissingError, InvalidInputError
from kokoro_tvm_ext.support.versions import installed_versions

# What decides the compiled code besides the weights: every file of the plugin and model
# layers (converters, passes, kernel interfaces, adapters, compile, runtime) and the native
# library. Hashing them all means an upgraded or edited plugin never reuses an artifact built
# by another version of itself, and a new file needs no list kept by hand.
COMPILER_LAYERS = ("plugin", "model")
# Left out: the weights package reads and rebuilds checkpoints, and the weights' own fingerprint
# covers what it makes, so editing the rebuild keeps every compiled library. The speaker encoder is
# another model, keyed by its own artifact: editing it must not recompile Kokoro.
NOT_COMPILER = ("model/weights", "model/speaker_encoder")


def compiler_files(package: Path | None = None) -> list[Path]:
    """The files whose bytes key a compiled artifact, in a stable order (caches excluded)."""
    package = package or Path(__file__).resolve().parents[1]
    skipped = [package / folder for folder in NOT_COMPILER]
    files = []
    for layer in COMPILER_LAYERS:
        files += sorted(
            f
            for f in (package / layer).rglob("*")
            if f.is_file() and "__pycache__" not in f.parts and not any(f.is_relative_to(s) for s in skipped)
        )
    return files


def compiler_fingerprint(package: Path | None = None) -> str:

    package = package or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(Path(_native.__file__).read_bytes())
    for f in compiler_files(package):
        digest.update(str(f.relative_to(package)).encode() + b"\0")
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


# LLVM's names of aarch64 CPUs (Arm's Cortex and Neoverse cores, Fujitsu's A64FX, Apple's, Ampere's, ...): an
# LLVM CPU name matching these compiles for aarch64 Linux wherever it is compiled; any other stays as it is
# (an x86 name: x86-64-v3, znver4, ...).
_ARM_CPU = re.compile(
    r"(cortex-[arx]\d+[a-z0-9]*|neoverse-[a-z0-9-]+|a64fx|apple-[a-z0-9-]+|ampere1[a-z0-9]*|thunderx[a-z0-9]*"
    r"|carmel|falkor|kryo|saphira|tsv110|exynos-m\d|grace|oryon-1|olympus)"
)
# A generic ARM level: armv8-a, armv8.2-a+dotprod, armv9-a+i8mm+bf16 -> LLVM's generic CPU with those features.
_ARM_LEVEL = re.compile(r"armv(8|9)(?:\.(\d))?-a((?:\+[a-z0-9-]+)*)")
_ARM_EXTENSION = {"fp16": "fullfp16", "crypto": "aes"}  # the assembler's names LLVM spells otherwise
AARCH64_TRIPLE = "aarch64-linux-gnu"


def _arm_target(name: str) -> dict | None:
    """The target dict of an ARM CPU name or level, else None."""
    if _ARM_CPU.fullmatch(name):
        return {"kind": "llvm", "mtriple": AARCH64_TRIPLE, "mcpu": name}
    level = _ARM_LEVEL.fullmatch(name)
    if level is None:
        return None
    major, minor, extensions = level.groups()
    version = f"+v{major}{'.' + minor if minor and minor != '0' else ''}a"
    mattr = [version] + [f"+{_ARM_EXTENSION.get(e, e)}" for e in extensions.split("+") if e]
    return {"kind": "llvm", "mtriple": AARCH64_TRIPLE, "mcpu": "generic", "mattr": mattr}


def target_spec(target: str | dict | None) -> dict | None:
    """``target`` as ``compile_kokoro`` takes it: None (this machine's CPU), or a TVM LLVM target dict.
    An LLVM CPU name becomes ``{"kind": "llvm", "mcpu": name}``; an ARM one (``cortex-a76``, ``neoverse-n1``,
    ``apple-m1``) also gets the triple ``aarch64-linux-gnu``, and a generic ARM level (``armv8.2-a+dotprod``)
    becomes LLVM's ``generic`` CPU with those features (``+v8.2a``, ``+dotprod``), so either compiles on an
    x86-64 machine. A dict whose ``mcpu`` is an ARM CPU and that names no triple gets it too."""
    if target is None:
        return None
    if isinstance(target, str):
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", target):
            raise InvalidInputError(
                f"target {target!r} is not an LLVM CPU name; give one such as x86-64-v3, cortex-a76 or "
                'armv8.2-a+dotprod, or a TVM target dict such as {"kind": "llvm", "mcpu": "x86-64-v3"}'
            )
        return _arm_target(target.lower()) or {"kind": "llvm", "mcpu": target}
    if not isinstance(target, dict) or target.get("kind") != "llvm":
        raise InvalidInputError(
            f"target must be an LLVM CPU name or a TVM target dict of kind llvm, got {target!r:.80}"
        )
    try:
        json.dumps(target)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"target {target!r:.80} holds values that are not JSON (strings, numbers, lists)"
        ) from None
    if "mtriple" not in target and isinstance(target.get("mcpu"), str) and _ARM_CPU.fullmatch(target["mcpu"]):
        return {**target, "mtriple": AARCH64_TRIPLE}
    return dict(target)


def target_id(target: dict | None) -> str:
    """The target's part of a cache key: for this machine's CPU its model and features (from /proc/cpuinfo,
    without LLVM); for a named target its CPU (or triple) and a hash of the whole dict."""
    if target is None:
        return host_cpu_id()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(target.get("mcpu") or target.get("mtriple") or target["kind"]))
    digest = hashlib.sha256(json.dumps(target, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{name[:40]}-{digest[:8]}"


def library_key(lstm_impl: str = "plugin", precision: str = "fp32", target: dict | None = None) -> str:
    """What decides the compiled library, weights aside. Computed without TVM's compiler (a cached
    artifact is found in milliseconds): TVM's version from the package metadata, the target by
    :func:`target_id`."""

    tvm_version = installed_versions()["apache-tvm"]
    key = f"tvm{tvm_version}-ext{_native.__version__}-{compiler_fingerprint()}-{target_id(target)}-{lstm_impl}"
    return key if precision == "fp32" else f"{key}-{precision}"


def artifact_key(
    weights_fingerprint: str, lstm_impl: str = "plugin", precision: str = "fp32", target: dict | None = None
) -> str:
    """The cache entry's name: the weights' fingerprint, then :func:`library_key`."""
    return f"{weights_fingerprint[:24]}-{library_key(lstm_impl, precision, target)}"


def same_library(out: Path, lstm_impl: str, precision: str, target: dict | None = None) -> Path | None:
    """A sound entry beside ``out`` compiled the same way (for other weights), else None."""
    suffix = "-" + library_key(lstm_impl, precision, target)
    if not out.parent.is_dir():
        return None
    for entry in sorted(out.parent.iterdir()):
        if entry != out and entry.name.endswith(suffix) and not entry.name.startswith("."):
            if cached_problem(entry) is None:
                return entry
    return None


def cached_artifact_dir(key: str) -> Path:

    return cache_dir() / "artifacts" / key


def cached_problem(out_dir: Path) -> str | None:
    """Why the cached artifact in ``out_dir`` cannot be used (None if it can)."""

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


def ensure_artifact(
    weights: str | os.PathLike | Weights | None = None,
    *,
    precision: str = "fp32",
    target: str | dict | None = None,
    lstm_impl: str = "plugin",
    quiet: bool = False,
    prebuilt: bool = True,
    artifact: str | os.PathLike | None = None,
) -> Path:
    """The compiled artifact for ``weights`` (a :class:`Weights`, a checkpoint path, or None: the default
    weights, see ``find_weights``), from the user cache: cached; else these weights bound to a cached
    library compiled for the same target (seconds, no torch); else, for this machine's CPU and if
    ``prebuilt``, bound to the best installed prebuilt library; else compiled (once, atomically; needs
    the `compile` extra). ``target``: None for this machine's CPU, else an LLVM CPU name or a TVM target
    dict. For this machine, ``int8`` and ``bf16`` become ``fp32`` (with a notice) where the CPU lacks their
    instructions. The weights are read, or built, only when the cache lacks their entry.

    A ``target`` of another architecture than this machine's is cross-compiled into a library-only entry
    (weights are not bound: the library's transforms run only on its own architecture), returned as is.
    ``artifact``: an artifact directory to use instead: returned as it is if it holds weights; a library-only
    one (cross-compiled, prebuilt) gets ``weights`` bound to it into a cache entry of its own (refused first,
    in one line, if this machine cannot run it); ``precision``, ``target`` and ``prebuilt`` do not apply."""
    if artifact is not None:
        return _with_weights(Path(artifact).expanduser(), weights, quiet)
    target = target_spec(target)
    weights = weights if isinstance(weights, Weights) else find_weights(weights)
    if target is None:  # for this CPU: int8 and bf16 only where it computes in them
        precision = precision_here(precision, host_features())
    if target_arch(target) != host_arch():  # cross-compiled: the library alone, the same for every weights
        out = cached_artifact_dir(f"library-{library_key(lstm_impl, precision, target)}")
        return ensure_compiled(
            out,
            lambda: load_kmodel(weights),
            weights=weights,
            target=target,
            lstm_impl=lstm_impl,
            precision=precision,
            quiet=quiet,
        )
    out = cached_artifact_dir(artifact_key(weights.fingerprint(), lstm_impl, precision, target))
    return ensure_compiled(
        out,
        lambda: load_kmodel(weights),
        weights=weights,
        checkpoint=lambda: _fitting_checkpoint(weights),
        target=target,
        lstm_impl=lstm_impl,
        precision=precision,
        weights_fingerprint=weights.fingerprint(),
        quiet=quiet,
        prebuilt=prebuilt,
    )


def _with_weights(artifact: Path, weights, quiet: bool) -> Path:
    """``artifact`` if it holds weights; else (a library-only artifact) ``weights`` bound to it, into a cache
    entry named after the weights, the library and this compiler (found there the next time)."""
    meta = read_meta(artifact)
    if holds_checkpoint(meta):
        return artifact
    check_cpu(meta, artifact)  # another architecture's library is refused before the weights are read
    weights = weights if isinstance(weights, Weights) else find_weights(weights)
    entry = cached_artifact_dir(
        f"{weights.fingerprint()[:24]}-library-{meta['library_sha256'][:16]}-{compiler_fingerprint()}"
    )
    if entry.exists() and cached_problem(entry) is None:
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    with _one_compile_at_a_time(entry.parent, quiet):
        if not entry.exists() or cached_problem(entry) is not None:
            _bind_into(entry, artifact, lambda: _fitting_checkpoint(weights), weights.fingerprint(), quiet)
    return entry


def _fitting_checkpoint(weights: Weights) -> dict:
    """The checkpoint's tensors, refused unless they are exactly Kokoro-82M's (a tensor missing, extra or of
    another shape named): the library checks only the tensors it takes, so a checkpoint of a larger model
    would otherwise run with its extra parts silently left out."""
    path = weights.ensure_file()
    state = read_checkpoint(path)
    check_fits({name: array.shape for name, array in state.items()}, f"weights {path}")
    return state


def ensure_compiled(
    out: Path,
    make_model,
    *,
    weights: Weights | None = None,
    checkpoint=None,
    target: dict | None = None,
    lstm_impl: str = "plugin",
    precision: str = "fp32",
    weights_fingerprint: str | None = None,
    quiet: bool = False,
    prebuilt: bool = True,
) -> Path:
    """The artifact in ``out``, made if needed: what :func:`ensure_artifact` runs, and what the tests use for a
    KModel that is no checkpoint on disk (``make_model()`` returns it). ``out`` if it holds a sound artifact;
    else, given ``checkpoint`` (a callable returning the weights as KModel's flat state-dict names -> arrays):
    the weights bound to an entry of the same library beside ``out``, else (if ``prebuilt`` and ``target`` is
    this machine's CPU) to the best installed prebuilt library, into an entry beside ``out`` named after it
    (returned); else ``make_model()`` compiled for ``target`` into ``out``, or, where this process imported
    TVM runtime-only (a model loaded first), ``weights`` compiled in a child process. Atomic either way; a
    missing compiler is a one-line ``ArtifactMissingError``. For a ``target`` of another architecture, nothing is
    bound (its library cannot run here): ``out`` is the library-only artifact ``compile_kokoro`` makes."""
    if out.exists() and cached_problem(out) is None:
        return out
    if cross_compiler(target) is not None:  # a missing cross compiler is said before any work
        checkpoint = None
    out.parent.mkdir(parents=True, exist_ok=True)
    with _one_compile_at_a_time(out.parent, quiet):
        problem = cached_problem(out) if out.exists() else "missing"
        if problem is None:  # another process made it while this one waited
            return out
        base = same_library(out, lstm_impl, precision, target) if checkpoint is not None else None
        if base is not None:
            _bind_into(out, base, checkpoint, weights_fingerprint, quiet)
            return out
        found = None
        if checkpoint is not None and prebuilt and target is None:  # the prebuilt levels are picked for this CPU
            found = best_prebuilt(lstm_impl, precision)
            if found.directory is not None:
                entry = out.with_name(f"{out.name}-{found.key}")
                if not entry.exists() or cached_problem(entry) is not None:
                    _bind_into(entry, found.directory, checkpoint, weights_fingerprint, quiet)
                return entry
        if not compiler_installed():
            raise _no_compiler(found, target)
        if compiler_available() or weights is None:
            model = make_model
        else:  # TVM's compiler cannot load here; a fresh process compiles these weights
            model = _ChildCompile(weights.ensure_file())
        _compile_into(out, problem, model, target, lstm_impl, precision, weights_fingerprint, quiet)
    return out


class _ChildCompile:
    """Compiles the checkpoint at ``weights`` in a child process (``python -m kokoro_tvm_ext.model.compile``),
    its progress lines on this one's stderr."""

    def __init__(self, weights: Path):
        self.weights = weights

    def run(self, out: Path, target, lstm_impl: str, precision: str, weights_fingerprint: str | None, quiet) -> None:
        argv = [str(out), str(self.weights), json.dumps(target), lstm_impl, precision, weights_fingerprint or ""]
        argv.append("1" if quiet else "0")
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}  # torch.export's notes, as an in-process compile hides them
        result = subprocess.run([sys.executable, "-m", "kokoro_tvm_ext.model.compile", *argv], env=env)
        if result.returncode != 0:
            raise ArtifactError(
                f"compiling Kokoro in a child process failed (exit {result.returncode}; its messages are above)"
            )


def _target_name(target: dict | None) -> str:
    return "this CPU" if target is None else f"the target {target.get('mcpu') or target.get('mtriple') or target}"


def _no_compiler(found, target: dict | None) -> Exception:
    """What to install when there is neither a library for the target nor a compiler to make one."""

    refused = found.refused if found is not None else ()
    passed_over = f" (the installed prebuilt libraries do not fit: {'; '.join(refused)})" if refused else ""
    prebuilt = (
        f'install the prebuilt libraries (pip install "{DISTRIBUTION}=={_native.__version__}") or '
        if target is None
        else ""
    )
    return ArtifactMissingError(
        f"no compiled Kokoro for {_target_name(target)}{passed_over} and no compiler to make one: {prebuilt}"
        'install the compiler (pip install "kokoro-tvm-ext[compile]")'
    )


def _bind_into(out: Path, base: Path, checkpoint, weights_fingerprint, quiet) -> None:

    state = checkpoint()  # first: building the default weights reports its own steps
    message = f"binding the weights to the compiled Kokoro in {base} (no compile)"
    with contextlib.nullcontext() if quiet else Progress().step(message):
        bind_checkpoint(base, state, out, weights_fingerprint)


def _compile_into(
    out: Path, problem: str, make_model, target, lstm_impl, precision, weights_fingerprint, quiet
) -> None:

    if problem != "missing":
        print(f"kokoro-tvm: the cached artifact cannot be used, compiling it again: {problem}", file=sys.stderr)
    elif not quiet:
        print(
            f"kokoro-tvm: compiling Kokoro for {_target_name(target)} (once; a few minutes) into {out}", file=sys.stderr
        )
    # Compiled into a temp dir beside the entry and renamed into place, so an
    # interrupted compile (Ctrl-C, a crash) never leaves a half-written entry.

    with atomic_directory(out) as tmp:
        if isinstance(make_model, _ChildCompile):
            make_model.run(tmp, target, lstm_impl, precision, weights_fingerprint, quiet)
            return
        compile_kokoro(
            make_model(),
            tmp,
            target=target,
            lstm_impl=lstm_impl,
            precision=precision,
            weights_fingerprint=weights_fingerprint,
            quiet=quiet,
        )
