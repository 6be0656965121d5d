"""Import libraries that load torch whenever it is installed, as if it were not.

``tvm_ffi`` (on import) and ``thinc`` (spaCy's backend) import torch if they can
find it: ~1.5 s and ~500 MB that synthesis never uses. While such a library is
imported under :func:`torch_hidden`, ``import torch`` fails as it would without
torch installed, so the library takes its torch-free path; afterwards torch
imports normally for whoever needs it (the compiler). Tensors from a torch
imported later still reach TVM through DLPack. (patches/0010 makes tvm_ffi itself
take torch only from ``sys.modules``.)
"""

from __future__ import annotations

import contextlib
import sys
import threading

_lock = threading.Lock()


@contextlib.contextmanager
def torch_hidden():
    """``import torch`` raises ImportError inside the block, unless torch is already
    imported (or already blocked by the caller), which is left as it is."""
    with _lock:
        if "torch" in sys.modules:
            yield
            return
        sys.modules["torch"] = None  # the import system's "known missing" marker
        try:
            yield
        finally:
            if "torch" in sys.modules and sys.modules["torch"] is None:
                del sys.modules["torch"]
