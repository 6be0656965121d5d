"""kokoro_tvm_ext.batch_matmul: attention's activation x activation products, against torch."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
from tvm_build import build_vm

torch = pytest.importorskip("torch")

KERNEL = "kokoro_tvm_ext.batch_matmul"


def reference(x, y, trans_x, trans_y):
    a, b = torch.from_numpy(x).double(), torch.from_numpy(y).double()
    if trans_x:
        a = a.transpose(-1, -2)
    if trans_y:
        b = b.transpose(-1, -2)
    return torch.matmul(a, b).numpy()


def run(x, y, trans_x, trans_y, out_shape):
    out = tvm.runtime.tensor(np.full(out_shape, np.nan, np.float32))
    kernel = tvm.get_global_func(KERNEL)
    kernel(int(trans_x), int(trans_y), tvm.runtime.tensor(x), tvm.runtime.tensor(y), out)
    return out.numpy()


@pytest.mark.parametrize(
    "x_shape,y_shape",
    [
        ((1, 1, 1), (1, 1, 1)),  # everything 1
        ((12, 17, 64), (12, 64, 17)),  # ALBERT scores at an odd length
        ((12, 17, 17), (12, 17, 64)),  # ALBERT context
        ((24, 130, 64), (24, 64, 130)),  # two items, length past a tile
        ((2, 1, 33, 5), (1, 3, 5, 47)),  # broadcast batch dims
        ((4, 2, 5, 6), (6, 7)),  # a 2-D right-hand side broadcasts over every batch item
        ((3, 0, 4), (3, 4, 5)),  # empty output
        ((2, 3, 0), (2, 0, 5)),  # empty inner dimension: zeros
    ],
)
@pytest.mark.parametrize("trans_x,trans_y", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_matches_torch(rng, x_shape, y_shape, trans_x, trans_y):
    swap = lambda s, t: (*s[:-2], s[-1], s[-2]) if t else s  # noqa: E731 - stored layout
    x = rng.standard_normal(swap(x_shape, trans_x)).astype(np.float32)
    y = rng.standard_normal(swap(y_shape, trans_y)).astype(np.float32)
    want = reference(x, y, trans_x, trans_y)
    got = run(x, y, trans_x, trans_y, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@I.ir_module
class Attention:
    """Scores and context of one attention layer, symbolic heads*batch and length."""

    @R.function
    def main(
        q: R.Tensor(("h", "t", 64), "float32"),
        k: R.Tensor(("h", "t", 64), "float32"),
        v: R.Tensor(("h", "t", 64), "float32"),
    ):
        h = T.int64()
        t = T.int64()
        with R.dataflow():
            # scores = q @ k^T with k read transposed (trans_y=1), then softmax @ v.
            s = R.call_dps_packed(
                KERNEL, (R.prim_value(0), R.prim_value(1), q, k), out_ty=R.Tensor((h, t, t), "float32")
            )
            p = R.nn.softmax(s, axis=-1)
            o = R.call_dps_packed(
                KERNEL, (R.prim_value(0), R.prim_value(0), p, v), out_ty=R.Tensor((h, t, 64), "float32")
            )
            R.output(o)
        return o


@pytest.mark.parametrize("heads,length", [(1, 1), (12, 17), (24, 100)])
def test_compiled_relax_attention_matches_torch(heads, length):
    vm = build_vm(Attention)
    rng = np.random.default_rng(heads * 1000 + length)
    q, k, v = (rng.standard_normal((heads, length, 64)).astype(np.float32) for _ in range(3))
    got = vm["main"](*(tvm.runtime.tensor(a) for a in (q, k, v))).numpy()
    qt, kt, vt = (torch.from_numpy(a).double() for a in (q, k, v))
    want = torch.softmax(qt @ kt.transpose(-1, -2), -1) @ vt
    # float32 against float64 through a softmax and a length-t sum.
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-4)


def test_bad_arguments_raise_named_errors():
    f = tvm.get_global_func(KERNEL)
    t = lambda *s: tvm.runtime.tensor(np.zeros(s, np.float32))  # noqa: E731
    with pytest.raises(ValueError, match="batch_matmul: y: the inner dimensions differ"):
        f(0, 0, t(2, 3, 4), t(2, 5, 6), t(2, 3, 6))
    with pytest.raises(ValueError, match=r"batch_matmul: the batch dimensions of x \[2, 3, 4\] and y \[3, 4, 5\]"):
        f(0, 0, t(2, 3, 4), t(3, 4, 5), t(2, 3, 5))
    with pytest.raises(ValueError, match=r"batch_matmul: out: expected shape \[2, 3, 5\], got \[2, 5, 3\]"):
        f(0, 0, t(2, 3, 4), t(2, 4, 5), t(2, 5, 3))
    with pytest.raises(ValueError, match="batch_matmul: trans_y: expected 0 or 1, got 3"):
        f(0, 3, t(2, 3, 4), t(2, 4, 5), t(2, 3, 5))
    with pytest.raises(ValueError, match="batch_matmul: x: expected rank >= 2, got rank 1"):
        f(0, 0, t(4), t(4, 5), t(5))
    with pytest.raises(TypeError, match="batch_matmul: x: expected dtype float32, got int64"):
        f(0, 0, tvm.runtime.tensor(np.zeros((2, 3, 4), np.int64)), t(2, 4, 5), t(2, 3, 5))
