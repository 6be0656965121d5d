"""Our kernels inside stock ``tvm.compile``: switch on the legalizations the Rust library registered.

The Rust library registers ``FLegalize`` handlers for ``relax.nn.conv1d``, ``relax.nn.conv1d_transpose``,
``relax.matmul`` and our LSTM op ``kokoro_tvm_ext.lstm`` (global functions ``kokoro_tvm_ext.legalize.*``,
see ``tvm-ext/src/legalize/``).
TVM's ``LegalizeOps``, in every Relax pipeline, then turns the float32 calls the kernels cover into
``call_dps_packed`` calls to them and every other call into TVM's own TIR, as before::

    import kokoro_tvm_ext
    with kokoro_tvm_ext.kernels_enabled():
        ex = tvm.compile(mod, target)          # stock pipeline, our kernels

Opt-in and scoped, because TVM's op registry is one per process: importing ``kokoro_tvm_ext`` changes
nobody's compile. The first ``enable_kernels()`` or ``kernels_enabled()`` installs the handlers at
priority level :data:`PRIORITY_LEVEL` (TVM's own are at 10, ours for ``slice_scatter`` at 11; TVM keeps
the highest level per op and cannot unregister). From then on each handler asks whether the kernels are
on, process-wide (``enable_kernels()`` / ``disable_kernels()``) or in a ``with kernels_enabled():``
block on the calling thread (``tvm.compile`` legalizes on the caller's thread), and otherwise calls
TVM's handler it replaced. Compiled artifacts then need the plugin loaded (``import kokoro_tvm_ext``)
wherever they run.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import tvm
import tvm.relax  # TVM's own handlers, which ours hand unsupported calls to, are registered on this import
import tvm_ffi

from kokoro_tvm_ext.plugin.legalize.lstm_tir import legalize_lstm
from kokoro_tvm_ext.plugin.lstm_call import LSTM_OP_NAME

#: Where our handlers sit in TVM's op-attribute registry: above TVM's (10) and our Python fixes (11).
PRIORITY_LEVEL = 15

_PREFIX = "kokoro_tvm_ext.legalize."


def _function(name: str):
    return tvm_ffi.get_global_func(_PREFIX + name)


#: The level of the LSTM op's own ``FLegalize`` (the TIR implementation): TVM's level for its ops' own.
LSTM_OWN_LEGALIZATION_LEVEL = 10


@functools.cache
def lstm_op():
    """The plugin's LSTM as a Relax op (``tvm.ir.Op``), registered on first use.

    The Rust library registers the op and its type inference (``tvm-ext/src/legalize/lstm_op.rs``); here its
    own legalization, the TIR implementation (legalize/lstm_tir.py), which our handler hands calls to when the
    kernels are off. Its arguments are the kernel's (``kernels.arguments("lstm", ...)``).
    """
    _function("register_lstm_op")()
    op = tvm.ir.Op.get(LSTM_OP_NAME)
    if op.get_attr("FLegalize") is None:
        tvm.ir.register_op_attr(LSTM_OP_NAME, "FLegalize", legalize_lstm, level=LSTM_OWN_LEGALIZATION_LEVEL)
    return op


def _install() -> None:
    # The LSTM op's own legalization (the TIR implementation), which our handler falls back on, comes with the op.
    lstm_op()
    _function("install")(PRIORITY_LEVEL)


def enable_kernels() -> None:
    """Our kernels for every compile in this process, until :func:`disable_kernels`."""
    _install()
    _function("set_enabled")(True)


def disable_kernels() -> None:
    """Undo :func:`enable_kernels` (``kernels_enabled()`` blocks still apply on their thread)."""
    _function("set_enabled")(False)


@contextlib.contextmanager
def kernels_enabled() -> Iterator[None]:
    """Our kernels for the compiles this thread runs inside the block (blocks nest)."""
    _install()
    _function("enter_scope")()
    try:
        yield
    finally:
        _function("exit_scope")()


def kernels_active() -> bool:
    """Whether a compile started now on this thread would use our kernels."""
    return bool(_function("active")())


def to_kernel(call):
    """The kernel call the handlers would give ``call`` (a ``relax.Call``), or None if they leave it to TVM."""
    return _function("to_kernel")(call)
