"""Libraries compiled for portable x86-64 levels and shipped without weights, picked by this CPU.

A library-only artifact is an artifact with no checkpoint: the compiled ``kokoro.so``, ``meta.json``
with ``checkpoint_weights`` all 0, and a ``weights.bin`` holding only the library's own constants.
``bind_checkpoint`` (model/binding.py) turns it into a ready artifact for any checkpoint of Kokoro's
shapes in seconds. The release (scripts/build-wheels.sh) compiles Kokoro for x86-64-v3 (AVX2, FMA) and
x86-64-v4 (AVX-512) with random weights (the library does not depend on them), keeps the libraries
only, and ships one directory per level in the ``kokoro-tvm-ext-artifacts`` package.
:func:`best_prebuilt` picks the installed level this CPU runs with the most features; the artifact
cache binds weights to it when this machine has compiled no library of its own.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.model.binding import library_constants, write_artifact
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, load_checked_meta, read_meta
from kokoro_tvm_ext.model.runtime.cpu_features import artifact_arch, described, host_arch, missing_features
from kokoro_tvm_ext.model.runtime.tvm_runtime import import_tvm
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS, load_weights
from kokoro_tvm_ext.support.errors import ArtifactCorruptError, ArtifactError
from kokoro_tvm_ext.support.versions import installed_versions

PACKAGE = "kokoro_tvm_ext_artifacts"  # the companion wheel's import name
DISTRIBUTION = "kokoro-tvm-ext-artifacts"
# The levels the release compiles: LLVM's portable x86-64 CPUs.
LEVELS = ("x86-64-v3", "x86-64-v4")
# The aarch64 levels (cross-compiled on x86: scripts/build-wheels.sh): Cortex-A72 (NEON, CRC: the Raspberry Pi 4,
# and every ARMv8-A server) and Cortex-A76 (dotprod, LSE, RCPC, FP16: the Pi 5, Neoverse N1 and later).
AARCH64_LEVELS = ("cortex-a72", "cortex-a76")


def library_only(artifact: Path, out: Path) -> Path:
    """The library of ``artifact`` without its checkpoint's weights, written to ``out`` atomically."""

    artifact, out = Path(artifact), Path(out)
    meta = load_checked_meta(artifact)
    if not meta["checkpoint_inputs"]:
        raise ArtifactCorruptError(
            f"{artifact} was compiled with its weights built in: its library takes no checkpoint"
        )
    constants = library_constants(meta, load_weights(artifact / WEIGHTS, meta["weights_index"], import_tvm()))
    return write_artifact(
        out,
        artifact,
        constants,
        meta,
        weights_fingerprint=None,
        checkpoint_weights={function: 0 for function in meta["checkpoint_inputs"]},
    )


def installed_prebuilt() -> list[Path]:
    """The library directories of the installed ``kokoro-tvm-ext-artifacts`` package (none if absent)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for root in spec.submodule_search_locations:
        found += [d for d in Path(root).iterdir() if d.is_dir() and (d / LIBRARY).is_file()]
    return sorted(found)


@dataclass(frozen=True)
class Prebuilt:
    """An installed library this process can run, and the ones passed over (``refused``: why, one per level)."""

    directory: Path | None
    refused: tuple[str, ...]

    @property
    def key(self) -> str:
        """What names an artifact bound to it: its level and its library's sha256 (which build it is)."""
        return f"prebuilt-{self.directory.name}-{read_meta(self.directory)['library_sha256'][:12]}"


def _problem(directory: Path, meta: dict, lstm_impl: str, precision: str) -> str | None:
    """Why this process cannot run the library in ``directory``, else None."""

    if (meta["lstm_impl"], meta["precision"]) != (lstm_impl, precision):
        return f"compiled with the {meta['lstm_impl']} LSTM in {meta['precision']}, not {lstm_impl} in {precision}"
    tvm = installed_versions()["apache-tvm"]
    if (meta["kokoro_tvm_ext"], meta["tvm"]) != (_native.__version__, tvm):
        return (
            f"built for kokoro-tvm-ext {meta['kokoro_tvm_ext']} on TVM {meta['tvm']}, this is {_native.__version__} on "
            f"TVM {tvm} (install {DISTRIBUTION}=={_native.__version__})"
        )
    if artifact_arch(meta) != host_arch():
        return f"compiled for {described(meta)}, this machine is {host_arch()}"
    missing = missing_features(meta)
    if missing:
        return f"needs {', '.join(missing)}, which this CPU lacks"
    return None


def best_prebuilt(lstm_impl: str = "plugin", precision: str = "fp32", candidates=None) -> Prebuilt:
    """The installed library (``candidates``: default :func:`installed_prebuilt`) that this CPU, TVM and
    kokoro-tvm-ext run, with the most CPU features; ``directory`` None if there is none."""
    usable, refused = [], []
    for directory in installed_prebuilt() if candidates is None else candidates:
        try:
            meta = read_meta(directory)
            problem = _problem(directory, meta, lstm_impl, precision)
        except ArtifactError as err:
            problem = str(err)
        if problem:
            refused.append(f"{directory.name}: {problem}")
        else:
            usable.append((len(meta["cpu_features"]), directory))
    best = max(usable, default=(0, None), key=lambda found: found[0])[1]
    return Prebuilt(best, tuple(refused))
