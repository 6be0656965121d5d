"""Small helpers shared by converters: dtypes and bound handling."""

from __future__ import annotations

import numpy as np
from tvm import relax


def output_dtype(node) -> str:
    """The dtype torch.export recorded for the node's (first) output."""
    val = node.meta["val"]
    if isinstance(val, (tuple, list)):
        val = val[0]
    return str(val.dtype).replace("torch.", "")


def is_integer_dtype(dtype: str) -> bool:
    return dtype.startswith(("int", "uint")) or dtype == "bool"


def dtype_limits(dtype: str) -> tuple[float | int, float | int]:
    """The smallest and largest value of a dtype, as Python numbers.

    TVM cannot turn infinity into an integer immediate, so integer tensors use
    their own range where torch uses "no bound".
    """
    if dtype == "bool":
        return 0, 1
    if is_integer_dtype(dtype):
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return -float("inf"), float("inf")


def tensor_dtype(expr: relax.Expr) -> str:
    return str(expr.ty.dtype)
