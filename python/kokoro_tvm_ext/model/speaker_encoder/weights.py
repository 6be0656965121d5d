"""The speaker encoder's weights: Resemblyzer 0.1.4's ``pretrained.pt``, read once from its PyPI wheel and kept in
the user cache as safetensors (``<cache>/speaker-encoder/resemblyzer-0.1.4.safetensors``).

The wheel (Apache-2.0) is fetched with ``pip download --no-deps`` on first use (its requirements, torch among
them, are not needed), or taken from a local copy: ``load_weights(source=PATH)`` or ``$KOKORO_TVM_RESEMBLYZER``,
either the wheel or its ``pretrained.pt``. The wheel's and the checkpoint's sha256 are checked, the checkpoint is
read without torch (pt_reader.py), and its tensors' names and shapes checked against the encoder's (spec.py).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.speaker_encoder.pt_reader import read_pt
from kokoro_tvm_ext.model.speaker_encoder.spec import WEIGHT_SHAPES
from kokoro_tvm_ext.support.cache import Progress, atomic_write, cache_dir
from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError
from kokoro_tvm_ext.support.file_hash import file_sha256
from kokoro_tvm_ext.support.pip_download import pip_download

WHEEL_REQUIREMENT = "resemblyzer==0.1.4"
WHEEL_FILE = "Resemblyzer-0.1.4-py3-none-any.whl"
WHEEL_SHA256 = "8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f"
MEMBER = "resemblyzer/pretrained.pt"
PT_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
SOURCE_ENV = "KOKORO_TVM_RESEMBLYZER"
CACHE_NAME = "resemblyzer-0.1.4.safetensors"
OFFLINE_HINT = (
    f"without PyPI access, copy {WHEEL_FILE} (or its {MEMBER}) to this machine and set ${SOURCE_ENV} to its path"
)


def weights_file() -> Path:
    return cache_dir() / "speaker-encoder" / CACHE_NAME


def _safetensors_numpy():
    try:
        import safetensors.numpy
    except ImportError:
        raise MissingAssetError(
            'the speaker encoder keeps its weights as safetensors: pip install "kokoro-tvm-ext[design]"'
        ) from None
    return safetensors.numpy


def check_weights(state: dict, origin: str) -> dict[str, np.ndarray]:
    """The encoder's tensors from ``state`` (float32, C order); CorruptAssetError naming a missing or misshapen one."""
    out = {}
    for name, shape in WEIGHT_SHAPES.items():
        value = state.get(name)
        if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype != np.float32:
            got = (
                "missing"
                if value is None
                else f"{getattr(value, 'dtype', type(value).__name__)} {getattr(value, 'shape', '')}"
            )
            raise CorruptAssetError(f"{origin} is not Resemblyzer's encoder: {name} is {got}, expected float32 {shape}")
        out[name] = np.ascontiguousarray(value)
    return out


def _checkpoint_from(path: Path, tmp: Path) -> Path:
    """The verified ``pretrained.pt`` from ``path`` (the wheel or the checkpoint itself)."""
    if not path.is_file():
        raise MissingAssetError(f"{path} does not exist; give the path of {WHEEL_FILE} or of its {MEMBER}")
    if zipfile.is_zipfile(path) and path.suffix == ".whl":
        digest = file_sha256(path)
        if digest != WHEEL_SHA256:
            raise CorruptAssetError(
                f"{path} is not Resemblyzer's {WHEEL_FILE}: sha256 {digest[:16]}..., expected {WHEEL_SHA256[:16]}...; "
                f"fetch it again: pip download --no-deps {WHEEL_REQUIREMENT}"
            )
        with zipfile.ZipFile(path) as wheel:
            checkpoint = tmp / "pretrained.pt"
            checkpoint.write_bytes(wheel.read(MEMBER))
        path = checkpoint
    digest = file_sha256(path)
    if digest != PT_SHA256:
        raise CorruptAssetError(
            f"{path} is not Resemblyzer 0.1.4's {MEMBER}: sha256 {digest[:16]}..., expected {PT_SHA256[:16]}..."
        )
    return path


def read_checkpoint(path: str | Path) -> dict[str, np.ndarray]:
    """The encoder's tensors from a Resemblyzer checkpoint (``model_state``), read without torch."""
    state = read_pt(path)
    if not isinstance(state, dict) or not isinstance(state.get("model_state"), dict):
        raise CorruptAssetError(f"{path} is not a Resemblyzer checkpoint (no model_state)")
    return check_weights(state["model_state"], str(path))


def load_weights(source: str | os.PathLike | None = None, progress: Progress | None = None) -> dict[str, np.ndarray]:
    """The encoder's weights (name -> float32 array): from the cache, else from ``source`` (or
    ``$KOKORO_TVM_RESEMBLYZER``, else pip), verified and cached."""
    st = _safetensors_numpy()
    target = weights_file()
    if source is None and target.is_file():
        try:
            return check_weights(st.load_file(str(target)), str(target))
        except Exception as err:  # noqa: BLE001 - a damaged cache entry is rebuilt from the wheel
            (progress or Progress()).say(f"the cached speaker encoder weights are damaged ({err}); reading them again")
    progress = progress or Progress()
    source = source or os.environ.get(SOURCE_ENV)
    with tempfile.TemporaryDirectory(prefix="kokoro-tvm-encoder-") as tmp:
        if source:
            path = Path(source).expanduser()
        else:
            with progress.step(f"fetching the speaker encoder's weights ({WHEEL_REQUIREMENT} wheel, 16 MB) with pip"):
                path = pip_download(
                    WHEEL_REQUIREMENT,
                    WHEEL_FILE,
                    Path(tmp),
                    what="the speaker encoder",
                    offline_hint=OFFLINE_HINT,
                    wheel=True,
                )
        state = read_checkpoint(_checkpoint_from(path, Path(tmp)))
    with atomic_write(target) as f:
        f.write(st.save(state, metadata={"source": f"{WHEEL_REQUIREMENT} {MEMBER}", "sha256": PT_SHA256}))
    return state


def weights_fingerprint() -> str:
    """What names these weights in a cache key (there is one set: Resemblyzer's)."""
    return hashlib.sha256(PT_SHA256.encode()).hexdigest()[:12]
