"""The Rust path end to end: compiled Relax calls a Rust kernel via call_dps_packed."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
from tvm_build import build_vm


def snake_reference(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    x64, a64 = x.astype(np.float64), alpha.astype(np.float64)
    return (x64 + np.sin(a64 * x64) ** 2 / a64).astype(np.float32)


@I.ir_module
class SnakeThenAdd:
    @R.function
    def main(x: R.Tensor(("b", "c", "n"), "float32"), alpha: R.Tensor((1, "c", 1), "float32")):
        b = T.int64()
        c = T.int64()
        n = T.int64()
        with R.dataflow():
            y = R.call_dps_packed("kokoro_tvm_ext.snake", (x, alpha), out_ty=R.Tensor((b, c, n), "float32"))
            z = R.add(y, x)
            R.output(z)
        return z


@pytest.fixture(scope="module")
def snake_vm():
    return build_vm(SnakeThenAdd)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 3, 17), (2, 128, 1000), (3, 5, 64)])
def test_compiled_relax_calls_rust_snake(snake_vm, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    alpha = rng.uniform(0.2, 2.0, (1, shape[1], 1)).astype(np.float32)
    got = snake_vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(alpha)).numpy()
    np.testing.assert_allclose(got, snake_reference(x, alpha) + x, rtol=1e-5, atol=1e-5)


def test_kernel_writes_into_the_callers_buffer(rng):
    """Destination passing with zero copies: the output tensor we pass is the one written."""
    snake = tvm.get_global_func("kokoro_tvm_ext.snake")
    x = rng.standard_normal((2, 4, 9)).astype(np.float32)
    alpha = np.full((1, 4, 1), 0.7, np.float32)
    out = tvm.runtime.tensor(np.zeros_like(x))
    snake(tvm.runtime.tensor(x), tvm.runtime.tensor(alpha), out)
    np.testing.assert_allclose(out.numpy(), snake_reference(x, alpha), rtol=1e-6, atol=1e-6)


def test_bad_arguments_raise_named_errors(rng):
    snake = tvm.get_global_func("kokoro_tvm_ext.snake")
    x = tvm.runtime.tensor(np.zeros((1, 4, 9), np.float32))
    out = tvm.runtime.tensor(np.zeros((1, 4, 9), np.float32))
    with pytest.raises(TypeError, match="snake: x: expected dtype float32, got float64"):
        snake(tvm.runtime.tensor(np.zeros((1, 4, 9))), tvm.runtime.tensor(np.ones((1, 4, 1), np.float32)), out)
    with pytest.raises(ValueError, match=r"snake: alpha: expected shape \[1, 4, 1\], got \[1, 3, 1\]"):
        snake(x, tvm.runtime.tensor(np.ones((1, 3, 1), np.float32)), out)
    with pytest.raises(ValueError, match=r"snake: expected 3 arguments \(x, alpha, out\), got 2"):
        snake(x, out)
