"""``weights.bin``: an artifact's lifted weights (passes/lift_weights.py), one raw file.

Each tensor's bytes start at a multiple of 64 (TVM's allocation alignment, which its
generated code assumes). ``meta.json`` holds the index: for each function of the
library, the list of ``[offset, shape, dtype]`` of the trailing parameters it takes.
The runtime maps the file copy-on-write (it never writes to it) and hands TVM a
zero-copy tensor per entry: pages are read from the page cache on first touch and
shared by every process that runs the same artifact.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np

WEIGHTS = "weights.bin"
ALIGN = 64


def _raw_bytes(tensor) -> np.ndarray:
    """A TVM tensor's bytes, for dtypes numpy lacks too (bfloat16, read as uint16)."""
    np_dtype, relabel = _numpy_dtype(str(tensor.dtype))
    if relabel:
        tensor = tensor._create_view(tuple(tensor.shape), str(np_dtype))
    return np.ascontiguousarray(tensor.numpy()).reshape(-1).view(np.uint8)


def write_weights(path: Path, lifted: dict) -> dict:
    """Write ``lifted`` (function name -> list of TVM tensors) to ``path``; its index for meta.json.

    Equal tensors are stored once: folding gives each use of a shared weight its own
    constant (ALBERT's one layer, used 12 times; weights both stages read), 242 of
    Kokoro's 621 MB."""
    index: dict[str, list] = {}
    placed: dict[tuple, list] = {}  # (dtype, shape, sha256 of the bytes) -> its entry
    offset = 0
    with open(path, "wb") as f:
        for name, tensors in sorted(lifted.items()):
            entries = []
            for tensor in tensors:
                data = _raw_bytes(tensor)
                shape = [int(d) for d in tensor.shape]
                key = (str(tensor.dtype), tuple(shape), hashlib.sha256(data).hexdigest())
                if key not in placed:
                    offset += -offset % ALIGN
                    f.seek(offset)
                    f.write(data.tobytes())
                    placed[key] = [offset, shape, str(tensor.dtype)]
                    offset += data.size
                entries.append(placed[key])
            index[name] = entries
    return index


def _numpy_dtype(dtype: str) -> tuple[np.dtype, bool]:
    """The numpy dtype to read ``dtype`` as, and whether TVM must relabel it: DLPack carries
    numpy's own integer, float and bool types only (bfloat16 is read as uint16)."""
    try:
        np_dtype = np.dtype(dtype)
        if np_dtype.kind in "biufc":
            return np_dtype, False
    except TypeError:
        pass
    bits = int("".join(c for c in dtype if c.isdigit()))
    return np.dtype(f"uint{bits}"), True


# What the index may name: numpy's integer, float and bool types, and bfloat16.
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES += ("float16", "float32", "float64", "bfloat16")


def index_problem(index: dict, file_bytes: int) -> str | None:
    """What is wrong with ``index`` (meta.json's weights_index) for a weights file of ``file_bytes``, as
    ``[function][number]: ...``, or None. Checked before mapping: an entry past the end would otherwise
    map short and fail to reshape."""
    for name, entries in index.items():
        if not isinstance(entries, list):
            return f"[{name!r}] must be a list of [offset, shape, dtype]"
        for number, entry in enumerate(entries):
            where = f"[{name!r}][{number}]"
            if not (isinstance(entry, list) and len(entry) == 3):
                return f"{where} must be [offset, shape, dtype], got {entry!r:.60}"
            offset, shape, dtype = entry
            if not _is_count(offset) or offset % ALIGN:
                return f"{where}: the offset must be a multiple of {ALIGN} from 0, got {offset!r:.30}"
            if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
                return f"{where}: the shape must be a list of sizes, got {shape!r:.60}"
            if dtype not in DTYPES:
                return f"{where}: the dtype must be one of {', '.join(DTYPES)}, got {dtype!r:.30}"
            end = offset + math.prod(shape) * _numpy_dtype(dtype)[0].itemsize
            if end > file_bytes:
                return f"{where} ends at byte {end}, past the end of {WEIGHTS} ({file_bytes} bytes)"
    return None


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def load_weights(path: Path, index: dict, tvm) -> dict[str, list]:
    """Function name -> its weight tensors, mapped from ``path`` without copying."""
    if not any(index.values()):  # a library without weights (numpy cannot map an empty file)
        return {name: [] for name in index}
    mapped = np.memmap(path, dtype=np.uint8, mode="c")
    loaded: dict[str, list] = {}
    cache: dict[int, object] = {}
    for name, entries in index.items():
        tensors = []
        for offset, shape, dtype in entries:
            if offset not in cache:
                np_dtype, relabel = _numpy_dtype(dtype)
                count = int(np.prod(shape, dtype=np.int64))
                array = mapped[offset : offset + count * np_dtype.itemsize].view(np_dtype).reshape(shape)
                tensor = tvm.runtime.from_dlpack(array)
                cache[offset] = tensor._create_view(tuple(shape), dtype) if relabel else tensor
            tensors.append(cache[offset])
        loaded[name] = tensors
    return loaded
