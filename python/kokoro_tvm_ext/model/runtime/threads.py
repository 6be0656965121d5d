"""One thread count for TVM's parallel loops and the plugin's kernels."""

from __future__ import annotations

import os

import tvm_ffi

from kokoro_tvm_ext import _native  # noqa: F401  (registers kokoro_tvm_ext.set_num_threads)


def set_num_threads(n: int) -> None:
    """Run TVM's loops and our kernels on ``n`` threads (default: ``TVM_NUM_THREADS``, else all CPUs).

    Both pools start on first use and keep their size, so call this before the
    first synthesis; asking for another count once the kernels' pool runs is a
    ValueError that names the count it has.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"num_threads must be a positive integer, got {n!r}")

    tvm_ffi.get_global_func("kokoro_tvm_ext.set_num_threads")(n)
    os.environ["TVM_NUM_THREADS"] = str(n)  # TVM reads it when its pool starts
