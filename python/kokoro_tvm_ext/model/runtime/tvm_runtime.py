"""TVM for running artifacts: its runtime library, without its compiler.

``import tvm`` loads ``libtvm_compiler.so`` (~260 MB, with LLVM) and the Relax
compiler's Python side, which imports torch when installed: ~2 s and ~700 MB a
process that only runs a compiled artifact never uses. TVM's own switch,
``TVM_USE_RUNTIME_LIB=1``, makes it load ``libtvm_runtime.so`` alone. It is read
once, when ``tvm`` is first imported, so the choice holds for the process:
whoever imports TVM first decides (the compiler, the tests, a user's own code
all get the full TVM, and the runtime uses that).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import tvm_ffi
from tvm_ffi import core

from kokoro_tvm_ext.plugin.native_log import quiet_harmless_warnings
from kokoro_tvm_ext.support.torch_free import torch_hidden

RUNTIME_ONLY_ENV = "TVM_USE_RUNTIME_LIB"
_lock = threading.Lock()


def import_tvm():
    """The ``tvm`` module: the one already imported, else TVM's runtime only."""
    if "tvm" in sys.modules:
        return sys.modules["tvm"]

    with _lock:
        before = os.environ.get(RUNTIME_ONLY_ENV)
        os.environ[RUNTIME_ONLY_ENV] = "1"
        try:
            with torch_hidden(), _unknown_types_looked_up_quietly():
                import tvm
        finally:
            if before is None:
                del os.environ[RUNTIME_ONLY_ENV]
            else:
                os.environ[RUNTIME_ONLY_ENV] = before
    return tvm


@contextlib.contextmanager
def _unknown_types_looked_up_quietly():
    """TVM's Python registers classes for compiler types too, which the runtime library
    lacks; tvm_ffi skips those in runtime-only mode, but only after asking the type
    table, which answers an unknown key by raising an internal error whose backtrace
    reads every loaded library's debug info: 0.2 s on the first miss. Keys the table
    does not list are answered "unknown" here without asking; the answer is the same.
    (patches/0011 makes the same change in tvm_ffi itself.)"""

    lookup = core._object_type_key_to_index
    registered = tvm_ffi.get_global_func("ffi.GetRegisteredTypeKeys", allow_missing=True)
    if registered is None:
        yield
        return

    def quiet_lookup(type_key: str):
        return lookup(type_key) if type_key in set(registered()) else None

    core._object_type_key_to_index = quiet_lookup
    try:
        yield
    finally:
        core._object_type_key_to_index = lookup


def compiler_available() -> bool:
    """False when TVM was imported runtime-only in this process (it cannot compile)."""
    if "tvm" not in sys.modules:
        return True
    from tvm.base import _RUNTIME_ONLY

    return not _RUNTIME_ONLY


def load_vm(library, tvm, memory_cfg: str | None = None):
    """A Relax VM on the CPU for the compiled ``library`` (a path); TVM's per-constant load trace is kept
    off stderr (plugin/native_log.py)."""
    from tvm.runtime.vm import VirtualMachine

    with quiet_harmless_warnings(count_hidden=False):
        module = tvm.runtime.load_module(str(library))
        return VirtualMachine(module, tvm.cpu(), memory_cfg=memory_cfg)
