"""Read a PyTorch checkpoint (``torch.save``'s file) into numpy arrays, without torch and without running its code.

Two layouts exist. The legacy one (torch < 1.6, Resemblyzer's ``pretrained.pt``): five pickles one after the
other (a magic number, the format version 1001, the writer's byte order and type sizes, the object, the list of
storage keys), then each storage as an int64 element count and its raw bytes, in that order. The zip one
(torch >= 1.6): ``<name>/data.pkl`` beside one raw file per storage, ``<name>/data/<key>``. Either way a tensor
is a ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` call on a storage the pickle names
by a persistent id.

The unpickler resolves only those rebuild functions, ``collections.OrderedDict`` and the storage types, and
refuses every other global by name: a checkpoint that needs any other code is not a plain state dict.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.support.errors import CorruptAssetError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_VERSION = 1001

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    def __init__(self, dtype) -> None:
        self.dtype = np.dtype(dtype).newbyteorder("<")


class _Storage:
    """A storage the pickle names; its array comes later (legacy: after the object's pickle)."""

    def __init__(self, dtype: np.dtype, numel: int) -> None:
        self.dtype, self.numel = dtype, numel
        self.array: np.ndarray | None = None


class _Tensor:
    """A tensor to build once its storage's bytes are read."""

    def __init__(self, storage: _Storage, offset: int, size, stride) -> None:
        self.storage, self.offset, self.size, self.stride = storage, int(offset), tuple(size), tuple(stride)

    def build(self, path) -> np.ndarray:
        data = self.storage.array
        if data is None:
            raise CorruptAssetError(f"{path}: a tensor's storage is missing from the file (truncated?)")
        reach = self.offset + sum((n - 1) * s for n, s in zip(self.size, self.stride) if n > 0)
        if self.offset < 0 or any(s < 0 for s in self.stride) or (0 not in self.size and reach >= data.size):
            raise CorruptAssetError(f"{path}: a tensor reaches beyond its storage (damaged file)")
        item = data.itemsize
        view = np.lib.stride_tricks.as_strided(
            data[self.offset :], shape=self.size, strides=[s * item for s in self.stride], writeable=False
        )
        return np.array(view, dtype=data.dtype.newbyteorder("="))


def _rebuild_tensor(storage, offset, size, stride, *_ignored):  # requires_grad, hooks, metadata
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *_ignored):  # an nn.Parameter: its data
    return data


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _StorageType(dtype) for name, dtype in _STORAGE_DTYPES.items()},
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, path, storages: dict) -> None:
        super().__init__(file)
        self.path, self.storages = path, storages

    def find_class(self, module: str, name: str):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise CorruptAssetError(
                f"{self.path} is not a plain PyTorch state dict: it needs {module}.{name}, which is refused "
                "(only tensors, their storages and OrderedDict are read)"
            )
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise CorruptAssetError(f"{self.path}: an unknown persistent reference {str(pid)[:60]} (not a storage)")
        _, kind, key, _location, numel = pid[:5]
        view = pid[5] if len(pid) > 5 else None
        if view is not None:  # legacy storage views: (view key, offset, size) into the root storage
            raise CorruptAssetError(f"{self.path}: storage views are not supported (re-save with torch >= 1.6)")
        storage = self.storages.get(key)
        if storage is None:
            storage = self.storages[key] = _Storage(kind.dtype, int(numel))
        return storage


def _resolve(obj, path):
    """``obj`` with every pending tensor built."""
    if isinstance(obj, _Tensor):
        return obj.build(path)
    if isinstance(obj, dict):
        return type(obj)((k, _resolve(v, path)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_resolve(v, path) for v in obj)
    return obj


def _read_legacy(f, path) -> object:
    magic = _Unpickler(f, path, {}).load()  # every pickle through the restricted reader, these too
    if magic != LEGACY_MAGIC:
        raise CorruptAssetError(f"{path} is not a PyTorch checkpoint (no zip archive, no legacy magic number)")
    version = _Unpickler(f, path, {}).load()
    if version != LEGACY_VERSION:
        raise CorruptAssetError(f"{path}: legacy PyTorch format version {version}, expected {LEGACY_VERSION}")
    sys_info = _Unpickler(f, path, {}).load()
    if not (isinstance(sys_info, dict) and sys_info.get("little_endian", False)):
        raise CorruptAssetError(f"{path} was written on a big-endian machine, which this reader does not take")
    storages: dict = {}
    obj = _Unpickler(f, path, storages).load()
    keys = _Unpickler(f, path, {}).load()
    if not isinstance(keys, list):
        raise CorruptAssetError(f"{path}: its storage list is damaged")
    for key in keys:
        storage = storages.get(key)
        if storage is None:
            raise CorruptAssetError(f"{path}: it stores a storage ({key}) that no tensor uses (damaged file)")
        count = np.frombuffer(f.read(8), dtype="<i8")
        data = f.read(int(count[0]) * storage.dtype.itemsize) if count.size == 1 and count[0] >= 0 else b""
        if count.size != 1 or count[0] != storage.numel or len(data) != storage.numel * storage.dtype.itemsize:
            raise CorruptAssetError(f"{path} is truncated or damaged (a storage's bytes are missing)")
        storage.array = np.frombuffer(data, dtype=storage.dtype)
    return _resolve(obj, path)


def _read_zip(archive: zipfile.ZipFile, path) -> object:
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise CorruptAssetError(f"{path} is a zip archive but not a PyTorch checkpoint (no <name>/data.pkl)")
    root = pickles[0][: -len("data.pkl")]
    storages: dict = {}
    obj = _Unpickler(io.BytesIO(archive.read(pickles[0])), path, storages).load()
    for key, storage in storages.items():
        try:
            data = archive.read(f"{root}data/{key}")
        except KeyError:
            raise CorruptAssetError(f"{path}: the storage {key} is missing from the archive") from None
        if len(data) < storage.numel * storage.dtype.itemsize:
            raise CorruptAssetError(f"{path}: the storage {key} is truncated")
        storage.array = np.frombuffer(data, dtype=storage.dtype, count=storage.numel)
    return _resolve(obj, path)


def read_pt(path: str | Path) -> object:
    """The object ``torch.save`` wrote to ``path``, tensors as numpy arrays (copies, native byte order).
    CorruptAssetError, naming the file, for anything else: not a checkpoint, truncated, or needing code."""
    path = Path(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return _read_zip(archive, path)
        with open(path, "rb") as f:
            return _read_legacy(f, path)
    except CorruptAssetError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, zipfile.BadZipFile) as err:
        raise CorruptAssetError(f"{path} is not a readable PyTorch checkpoint ({type(err).__name__}: {err})") from None
