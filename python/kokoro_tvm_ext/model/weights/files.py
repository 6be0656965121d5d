"""Read a Kokoro-82M checkpoint into numpy arrays named by KModel's flat state-dict keys.

Formats, told apart by the file's extension:

* ``.safetensors``: read with the ``safetensors`` package's numpy API; no torch.
* ``.pth`` / ``.pt`` (``torch.save``): needs torch, read with ``weights_only=True``. Without torch
  the error says which extra to install, or how to convert the file where torch is installed
  (``kokoro-tvm weights convert IN.pth OUT.safetensors``).

Names: flat (``bert.embeddings.word_embeddings.weight``), with a leading ``module.``, or
hexgrad's grouped layout (``{"bert": {"module.embeddings...": tensor}, ...}``, also flattened to
``bert.module.embeddings...``) all give the flat KModel names.

Values come back float32 (float16, bfloat16 and float64 converted) and finite. Buffers KModel
computes itself (``bert.embeddings.position_ids``, see :mod:`.layout`) are dropped; any
other tensor that is not floating point, or holds NaN or infinity, is refused with the file and
the tensor named. Whether the names and shapes fit a model is :func:`check_fits`' job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.weights.layout import SUBMODULES, bundled_layout
from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError

SAFETENSORS = ".safetensors"
TORCH_SUFFIXES = (".pth", ".pt")
CONVERT_HINT = "kokoro-tvm weights convert IN.pth OUT.safetensors"
_PREFIX = "module."
# safetensors dtypes numpy holds: the floats, and the integers of buffers such as position_ids.
_NUMPY_DTYPES = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL"}


def read_checkpoint(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``{flat KModel name: float32 array}`` from a ``.safetensors`` or ``.pth`` file; see the module docstring."""
    path = Path(path)
    suffix = check_format(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise MissingAssetError(f"weights file not found: {path}") from None
    if size == 0:
        raise CorruptAssetError(f"weights file {path} is empty")
    raw = _read_safetensors(path) if suffix == SAFETENSORS else _read_torch(path)
    return _as_float32(flatten_state_dict(raw, f"weights file {path}"), path)


def check_format(path: Path) -> str:
    """``path``'s extension, lower-cased, if it names a format :func:`read_checkpoint` reads."""
    suffix = path.suffix.lower()
    if suffix != SAFETENSORS and suffix not in TORCH_SUFFIXES:
        raise CorruptAssetError(
            f"weights file {path}: {'the extension ' + suffix if suffix else 'no extension'} is not a checkpoint "
            "format this reads; give a .safetensors or a .pth file"
        )
    return suffix


def safetensors_shapes(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{name: (shape, dtype)}`` from a safetensors file's header, without reading its data.
    Opening checks that the header covers the file exactly (so a truncated file is refused)."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(path, framework="np") as f:
            return {k: (tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()}
    except SafetensorError as err:
        raise CorruptAssetError(_unreadable(path, err)) from None


def check_fits(shapes: Mapping[str, tuple[int, ...]], origin: str, expected: Mapping | None = None) -> None:
    """Refuse ``shapes`` (flat name -> shape) unless they are exactly ``expected``'s (default:
    Kokoro-82M's KModel); the message names the missing, unexpected and wrongly shaped tensors."""
    expected = expected if expected is not None else bundled_layout().shapes
    missing = [k for k in expected if k not in shapes]
    extra = [k for k in shapes if k not in expected]
    wrong = [
        f"{k} is {tuple(shapes[k])}, not {tuple(v)}"
        for k, v in expected.items()
        if k in shapes and tuple(shapes[k]) != tuple(v)
    ]
    parts = []
    for what, keys in (("wrong shape", wrong), ("missing", missing), ("unexpected", extra)):
        if keys:
            parts.append(f"{what} {len(keys)} ({', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''})")
    if parts:
        raise CorruptAssetError(f"{origin} do not fit Kokoro-82M's KModel: {'; '.join(parts)}")


def normalize_state_dict(state, origin: str = "state_dict") -> dict[str, dict]:
    """hexgrad's grouped layout, a ``module.``-prefixed one, or a flat dict -> ``{submodule: {key: tensor}}``."""
    if not isinstance(state, dict) or not state:
        raise CorruptAssetError(f"{origin} is not a Kokoro state_dict (got {type(state).__name__})")
    if all(isinstance(v, dict) for v in state.values()):
        grouped = {k: v for k, v in state.items()}
    else:
        grouped = {}
        for key, value in state.items():
            if isinstance(value, dict):
                raise CorruptAssetError(f"{origin} mixes grouped and flat entries ({key} is a group)")
            key = key.removeprefix(_PREFIX)
            head, _, rest = key.partition(".")
            grouped.setdefault(head, {})[rest] = value
    unknown = sorted(set(grouped) - set(SUBMODULES))
    if unknown:
        raise CorruptAssetError(f"{origin} has entries KModel does not know: {', '.join(unknown)}")
    return {head: {k.removeprefix(_PREFIX): v for k, v in sub.items()} for head, sub in grouped.items()}


def flatten_state_dict(state, origin: str = "state_dict") -> dict:
    """Any layout :func:`normalize_state_dict` takes -> ``{"bert.embeddings...": tensor}``."""
    return {f"{head}.{k}": v for head, sub in normalize_state_dict(state, origin).items() for k, v in sub.items()}


def _unreadable(path: Path, err: Exception) -> str:
    detail = str(err).splitlines()[0] if str(err) else type(err).__name__
    return f"cannot load weights file {path}: it is truncated, damaged or not a safetensors file ({detail})"


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        import safetensors
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise MissingAssetError(
            f"reading the .safetensors checkpoint {path} needs safetensors: pip install 'kokoro-tvm-ext[speak]'"
        ) from None

    out: dict[str, np.ndarray] = {}
    bf16: list[str] = []
    try:
        with safe_open(path, framework="np") as f:
            for key in f.keys():
                dtype = f.get_slice(key).get_dtype()
                if dtype == "BF16":  # numpy has no bfloat16: read its bits below
                    bf16.append(key)
                elif dtype in _NUMPY_DTYPES:
                    out[key] = f.get_tensor(key)
                else:  # float8 and the like, which numpy lacks
                    raise CorruptAssetError(
                        f"weights file {path}: {key} is {dtype}; KModel's weights are read from F32, F16, BF16 or F64"
                    )
        if bf16:
            raw = dict(safetensors.deserialize(path.read_bytes()))
            for key in bf16:
                bits = np.frombuffer(raw[key]["data"], "<u2").astype(np.uint32) << 16
                out[key] = bits.view(np.float32).reshape(raw[key]["shape"])
    except SafetensorError as err:
        raise CorruptAssetError(_unreadable(path, err)) from None
    return out


def _read_torch(path: Path) -> dict:
    try:
        import torch
    except ImportError:
        raise MissingAssetError(
            f'reading the .pth checkpoint {path} needs PyTorch: pip install "kokoro-tvm-ext[compile]" '
            f"(or convert it to .safetensors where PyTorch is installed: {CONVERT_HINT})"
        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many types for bad files
        detail = str(err).splitlines()[0] if str(err) else ""
        raise CorruptAssetError(f"cannot load weights file {path}: {type(err).__name__}: {detail}") from None

    def to_numpy(value, where: str):
        if isinstance(value, dict):
            return {k: to_numpy(v, f"{where}{k}.") for k, v in value.items()}
        if not isinstance(value, torch.Tensor):
            raise CorruptAssetError(
                f"weights file {path}: {where.rstrip('.')} is a {type(value).__name__}, not a tensor"
            )
        value = value.detach()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()

    return to_numpy(state, "") if isinstance(state, dict) else state


def _as_float32(flat: dict, path: Path) -> dict[str, np.ndarray]:
    computed = bundled_layout().computed_buffers
    out: dict[str, np.ndarray] = {}
    for key, value in flat.items():
        if key in computed:
            continue
        if value.dtype.kind != "f":
            raise CorruptAssetError(
                f"weights file {path}: {key} holds {value.dtype} values; KModel's weights are float"
            )
        with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf: refused below
            value = value.astype(np.float32, copy=False)
        bad = value.size - int(np.count_nonzero(np.isfinite(value)))
        if bad:
            raise CorruptAssetError(f"weights file {path}: {key} holds {bad} NaN or infinite values")
        out[key] = value
    return out
