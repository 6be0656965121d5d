"""The fused AdaIN kernel through TVM against torch: InstanceNorm1d + AdaIN + Snake / leaky_relu."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T
from tvm_build import build_vm

torch = pytest.importorskip("torch")

EPS = 1e-5
SLOPE = 0.2


# The Snake variant as compiled models call it (call_dps_packed from a VM);
# the other variants are called straight through TVM's registry (run_adain).
@I.ir_module
class AdaIN:
    @R.function
    def snake(
        x: R.Tensor(("b", "c", "n"), "float32"),
        w: R.Tensor(("c",), "float32"),
        bias: R.Tensor(("c",), "float32"),
        scale: R.Tensor(("b", "c", 1), "float32"),
        shift: R.Tensor(("b", "c", 1), "float32"),
        alpha: R.Tensor((1, "c", 1), "float32"),
    ):
        b, c, n = T.int64(), T.int64(), T.int64()
        with R.dataflow():
            y = R.call_dps_packed(
                "kokoro_tvm_ext.adain",
                (
                    R.prim_value(T.int64(1)),
                    R.prim_value(T.int64(1)),
                    R.prim_value(T.float64(EPS)),
                    R.prim_value(T.float64(0.0)),
                    x,
                    w,
                    bias,
                    scale,
                    shift,
                    alpha,
                ),
                out_ty=R.Tensor((b, c, n), "float32"),
            )
            R.output(y)
        return y


@pytest.fixture(scope="module")
def vm():
    return build_vm(AdaIN)


def torch_reference(x, w, bias, scale, shift, alpha, act):
    """Kokoro's modules in torch float32: InstanceNorm1d(affine) then (1 + gamma) * n + beta, then act.

    torch refuses instance norm over one element, so length 1 spells it out (n = 0).
    """
    c = x.shape[1]
    xt = torch.from_numpy(x)
    with torch.no_grad():
        if x.shape[2] > 1:
            norm = torch.nn.InstanceNorm1d(c, affine=w is not None, eps=EPS)
            if w is not None:
                norm.weight.copy_(torch.from_numpy(w))
                norm.bias.copy_(torch.from_numpy(bias))
            n = norm(xt)
        else:
            n = torch.zeros_like(xt)
            if w is not None:
                n = n * torch.from_numpy(w)[:, None] + torch.from_numpy(bias)[:, None]
        y = torch.from_numpy(scale) * n + torch.from_numpy(shift)
        if act == "snake":
            a = torch.from_numpy(alpha)
            y = y + (1 / a) * (torch.sin(a * y) ** 2)
        elif act == "leaky_relu":
            y = torch.nn.functional.leaky_relu(y, SLOPE)
    return y.numpy()


def inputs(rng, b, c, n):
    x = (rng.standard_normal((b, c, n)) * 2 + rng.uniform(-3, 3, (b, c, 1))).astype(np.float32)
    w = rng.uniform(0.5, 1.5, c).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    scale = (1 + rng.standard_normal((b, c, 1)) * 0.3).astype(np.float32)
    shift = (rng.standard_normal((b, c, 1)) * 0.3).astype(np.float32)
    alpha = rng.uniform(0.2, 3.0, (1, c, 1)).astype(np.float32)
    return x, w, bias, scale, shift, alpha


SHAPES = [(1, 1, 5), (1, 3, 1), (1, 17, 1000), (1, 128, 5), (1, 128, 1000), (2, 3, 5), (3, 17, 1)]


ACT_CODES = {"none": 0, "snake": 1, "leaky_relu": 2}


def run_adain(vm, act, x, w, bias, scale, shift, alpha):
    t = tvm.runtime.tensor
    if act == "snake":
        return vm["snake"](t(x), t(w), t(bias), t(scale), t(shift), t(alpha)).numpy()
    tensors = [x, scale, shift] if w is None else [x, w, bias, scale, shift]
    out = t(np.full(x.shape, np.nan, np.float32))
    slope = SLOPE if act == "leaky_relu" else 0.0
    tvm.get_global_func("kokoro_tvm_ext.adain")(ACT_CODES[act], int(w is not None), EPS, slope, *map(t, tensors), out)
    return out.numpy()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("act, affine", [("snake", True), ("leaky_relu", True), ("leaky_relu", False), ("none", False)])
def test_matches_torch(vm, rng, shape, act, affine):
    x, w, bias, scale, shift, alpha = inputs(rng, *shape)
    if not affine:
        w = bias = None
    got = run_adain(vm, act, x, w, bias, scale, shift, alpha)
    want = torch_reference(x, w, bias, scale, shift, alpha, act)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_a_large_mean_does_not_cancel(vm, rng):
    """Rows far from zero: f64 statistics keep the normalized values torch's float64 gives."""
    x, w, bias, scale, shift, alpha = inputs(rng, 1, 17, 1000)
    x = x + np.float32(1000.0)
    got = run_adain(vm, "snake", x, w, bias, scale, shift, alpha)
    x64 = x.astype(np.float64)
    n = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + EPS)
    y = scale * (n * w[:, None] + bias[:, None]) + shift
    a = alpha.astype(np.float64)
    want = y + np.sin(a * y) ** 2 / a
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bad_arguments_raise_named_errors():
    adain = tvm.get_global_func("kokoro_tvm_ext.adain")
    t = tvm.runtime.tensor
    x = t(np.zeros((1, 4, 9), np.float32))
    s = t(np.ones((1, 4, 1), np.float32))
    out = t(np.zeros((1, 4, 9), np.float32))
    with pytest.raises(ValueError, match=r"adain: act: expected a value in \[0, 2\], got 5"):
        adain(5, 0, EPS, 0.0, x, s, s, out)
    with pytest.raises(TypeError, match="adain: eps: expected a float"):
        adain(0, 0, "eps", 0.0, x, s, s, out)
    with pytest.raises(ValueError, match="adain: expected 9 arguments for act=1, has_norm_affine=0, got 7"):
        adain(1, 0, EPS, 0.0, x, s, s)
    with pytest.raises(ValueError, match=r"adain: shift: expected shape \[1, 4, 1\], got \[1, 3, 1\]"):
        adain(0, 0, EPS, 0.0, x, s, t(np.ones((1, 3, 1), np.float32)), out)
    with pytest.raises(TypeError, match="adain: x: expected dtype float32, got float64"):
        adain(0, 0, EPS, 0.0, t(np.zeros((1, 4, 9))), s, s, out)
    with pytest.raises(ValueError, match="adain: alpha must be non-zero"):
        adain(1, 0, EPS, 0.0, x, s, s, t(np.zeros((1, 4, 1), np.float32)), out)
