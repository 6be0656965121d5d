"""Import libraries that load torch whenever it is installed, as if it were not.

``tvm_ffi`` (on import) and ``thinc`` (spaCy's backend) import torch if they can
find it: ~1.5 s and ~500 MB that synthesis never uses. While such a library is
imported under :func:`torch_hidden`, ``import torch`` fails as it would without
torch installed, so the library takes its torch-free path; afterwards torch
imports normally for whoever needs it (the compiler). Tensors from a torch
imported later still reach TVM through DLPack. (patches/0010 makes tvm_ffi itself
take torch only from ``sys.modules``.) tvm_ffi also imports cuda-python's driver
bindings when it finds them (torch's CUDA wheels bring ``cuda-bindings``): 40-130 ms
of every start for CUDA streams a CPU synthesis never passes; the package hides them
too while it imports tvm_ffi.
"""

from __future__ import annotations

import contextlib
import sys
import threading

_lock = threading.Lock()


@contextlib.contextmanager
def torch_hidden(*also: str):
    """``import torch``, and of each module named in ``also``, raises ImportError inside the
    block, unless it is already imported (or already blocked by the caller): that one is left
    as it is."""
    with _lock:
        hidden = [name for name in ("torch", *also) if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # the import system's "known missing" marker
        try:
            yield
        finally:
            for name in hidden:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]
