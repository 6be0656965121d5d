"""The kernels' interfaces: the Rust parsers and kernels.py's description agree, and errors keep their kind."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, tirx

import kokoro_tvm_ext
from kokoro_tvm_ext import _native
from kokoro_tvm_ext.plugin import kernels

T = relax.TensorType


def _values_to_try(iface: kernels.Interface) -> list[dict]:
    """Scalar values covering every presence condition and repeat count of ``iface``."""
    choices = {}
    equals = {}
    for p in iface.params:
        members = p.params if isinstance(p, kernels.Group) else [p]
        for q in members:
            if q.when and "==" in q.when:
                name, value = q.when.split("==")
                equals.setdefault(name, set()).add(int(value))
    for p in iface.scalars:
        if p.kind == "flag":
            choices[p.name] = [0, 1]
        elif p.kind == "float":
            choices[p.name] = [0.25]
        elif p.name in equals:
            choices[p.name] = sorted(equals[p.name] | {0})
        elif p.name == "output_padding":
            choices[p.name] = [0]
        elif p.name == "num_layers":
            choices[p.name] = [1, 2]
        else:
            choices[p.name] = [1]
    names = list(choices)
    return [dict(zip(names, combo)) for combo in itertools.product(*(choices[n] for n in names))]


def _dps_kernels():
    return [i for i in kernels.interfaces().values() if i.dps]


def _packed_args(iface, values, bad_at=None):
    """A packed argument list: the scalars, then a small tensor for each tensor and output, except an
    int at tensor position ``bad_at``."""
    scalars = [values[p.name] for p in iface.scalars]
    tensor = tvm.runtime.tensor(np.zeros((1,), np.float32))
    tensors = [t for t in iface.arguments(values) if t[1] not in kernels.SCALAR_KINDS]
    return scalars + [7 if i == bad_at else tensor for i in range(len(tensors))], tensors


def test_every_registered_function_has_an_interface_that_parses():
    # The legalization handlers are the compiler's (test_kernel_legalize.py), not kernels.
    names = [n for n in kokoro_tvm_ext.registered_functions() if not n.startswith("kokoro_tvm_ext.legalize.")]
    found = kernels.interfaces()
    assert sorted(i.global_name for i in found.values()) == sorted(names)
    for iface in found.values():
        kinds = [p.kind for p in iface.params]
        scalars = len(iface.scalars)
        assert all(k in kernels.SCALAR_KINDS for k in kinds[:scalars])
        assert not any(k in kernels.SCALAR_KINDS for k in kinds[scalars:]), iface.name
        assert ("output" in kinds) == iface.dps, iface.name
    conv = kernels.interface("kokoro_tvm_ext.conv1d")
    assert conv.names == ("stride", "pad_left", "pad_right", "dilation", "groups", "has_bias", "x", "w", "bias", "out")
    with pytest.raises(KeyError, match="no kernel named 'conv2d'"):
        kernels.interface("conv2d")


@pytest.mark.parametrize("iface", _dps_kernels(), ids=lambda i: i.name)
def test_rust_checks_the_count_python_computes_for_every_flag_combination(iface):
    kernel = tvm_ffi.get_global_func(iface.global_name)
    fixed = all(isinstance(p, kernels.Param) and p.when is None for p in iface.params)
    for values in _values_to_try(iface):
        args, _ = _packed_args(iface, values)
        n = len(args)
        assert n == iface.argument_count(values)
        names = ", ".join(label for label, _ in iface.arguments(values))
        want = (
            rf"{iface.name}: expected {n} arguments \({names}\)"
            if fixed
            else rf"{iface.name}: expected {n} arguments for "
        )
        for wrong in (args + [args[-1]], args[:-1]):
            with pytest.raises(ValueError, match=want):
                kernel(*wrong)


@pytest.mark.parametrize("iface", _dps_kernels(), ids=lambda i: i.name)
def test_rust_reads_each_argument_under_the_name_python_gives_it(iface):
    kernel = tvm_ffi.get_global_func(iface.global_name)
    for values in _values_to_try(iface):
        _, tensors = _packed_args(iface, values)
        for at, (label, _) in enumerate(tensors):
            args, _ = _packed_args(iface, values, bad_at=at)
            with pytest.raises(TypeError, match=rf"^{iface.name}: {label}: expected a tensor".replace("[", r"\[")):
                kernel(*args)


def _run(call: relax.Call, env: dict, out_shape) -> np.ndarray:
    """Calls the registered kernel with the arguments of ``call``, as the compiled VM would."""
    args = []
    for f in call.args[1].fields:
        if isinstance(f, tirx.IntImm):
            args.append(int(f.value))
        elif isinstance(f, tirx.FloatImm):
            args.append(float(f.value))
        else:
            args.append(tvm.runtime.tensor(env[str(f.name)]))
    out = tvm.runtime.tensor(np.full(out_shape, np.nan, np.float32))
    tvm_ffi.get_global_func(str(call.args[0].global_symbol))(*args, out)
    return out.numpy()


def _conv1d(x, w, b, stride, pad, dilation, groups):
    """Direct float64 convolution, torch.nn.functional.conv1d's definition."""
    batch, cin, length = x.shape
    cout, cin_g, k = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad)))
    lout = (length + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((batch, cout, lout))
    for o in range(cout):
        g = o // (cout // groups)
        for t in range(lout):
            window = xp[:, g * cin_g : (g + 1) * cin_g, t * stride : t * stride + dilation * (k - 1) + 1 : dilation]
            out[:, o, t] = (window * w[o]).sum(axis=(1, 2)) + (b[o] if b is not None else 0.0)
    return out


@pytest.mark.parametrize("has_bias", [0, 1])
def test_a_built_conv1d_call_runs_the_kernel_like_numpy(rng, has_bias):
    x = rng.standard_normal((2, 4, 11)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    xv, wv, bv = (relax.Var(n, T(a.shape, "float32")) for n, a in (("x", x), ("w", w), ("b", b)))
    want = _conv1d(x, w, b if has_bias else None, stride=2, pad=1, dilation=2, groups=2)
    call = kernels.call(
        "conv1d",
        T(want.shape, "float32"),
        stride=2,
        pad_left=1,
        pad_right=1,
        dilation=2,
        groups=2,
        has_bias=has_bias,
        x=xv,
        w=wv,
        bias=bv if has_bias else None,
    )
    got = _run(call, {"x": x, "w": w, "b": b}, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    kc = kernels.KernelCall.read(call)
    assert (kc.name, kc["stride"], kc["groups"], kc["has_bias"]) == ("conv1d", 2, 2, has_bias)
    assert kc["w"].same_as(wv) and (kc["bias"] is None) == (not has_bias)


def test_matmul_calls_read_and_rewrite_by_name(rng):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    xv, wv, bv = (relax.Var(n, T(a.shape, "float32")) for n, a in (("x", x), ("w", w), ("b", b)))
    plain = kernels.call("matmul", T((3, 5, 6), "float32"), has_bias=0, x=xv, w=wv)
    np.testing.assert_allclose(_run(plain, {"x": x, "w": w}, (3, 5, 6)), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    biased = kernels.KernelCall.read(plain).replace(has_bias=1, bias=bv)
    np.testing.assert_allclose(
        _run(biased, {"x": x, "w": w, "b": b}, (3, 5, 6)), x.astype(np.float64) @ w + b, rtol=1e-5, atol=1e-5
    )
    kc = kernels.KernelCall.read(biased)
    assert kc["has_bias"] == 1 and kc["bias"].same_as(bv)
    assert str(kc.to("matmul_bf16").args[0].global_symbol) == "kokoro_tvm_ext.matmul_bf16"
    assert kernels.KernelCall.read(relax.op.add(xv, xv)) is None


def test_lstm_weights_are_a_group_per_layer_and_direction():
    x = relax.Var("x", T((5, 2, 3), "float32"))
    ws = [relax.Var(f"w{i}", T((16, 4), "float32")) for i in range(8)]
    weights = [{"w_ih": ws[2 * i], "w_hh": ws[2 * i + 1]} for i in range(4)]
    st = T((4, 2, 4), "float32")
    flags = dict(num_layers=2, bidirectional=1, batch_first=0, has_biases=0, has_lengths=0, has_state=0)
    call = kernels.call("lstm", [T((5, 2, 8), "float32"), st, st], x=x, weights=weights, **flags)
    fields = list(call.args[1].fields)
    assert [int(f.value) for f in fields[:6]] == [2, 1, 0, 0, 0, 0]
    assert all(a.same_as(b) for a, b in zip(fields[6:], [x, *ws]))
    kc = kernels.KernelCall.read(call)
    assert [sorted(d) for d in kc["weights"]] == [["w_hh", "w_ih"]] * 4 and kc["weights"][3]["w_hh"].same_as(ws[7])
    with pytest.raises(TypeError, match="lstm: weights: expected 4 entries, got 3"):
        kernels.call("lstm", [T((5, 2, 8), "float32"), st, st], x=x, weights=weights[:3], **flags)


def test_bad_calls_are_refused_by_name():
    x = relax.Var("x", T((2, 3), "float32"))
    out = T((2, 3), "float32")
    with pytest.raises(TypeError, match="matmul: missing argument bias \\(passed when has_bias==1\\)"):
        kernels.call("matmul", out, has_bias=1, x=x, w=x)
    with pytest.raises(TypeError, match="matmul: bias is passed only when has_bias==1"):
        kernels.call("matmul", out, has_bias=0, x=x, w=x, bias=x)
    with pytest.raises(TypeError, match="matmul: unknown argument\\(s\\) weight"):
        kernels.call("matmul", out, has_bias=0, x=x, weight=x)
    with pytest.raises(TypeError, match="matmul: missing argument has_bias"):
        kernels.call("matmul", out, x=x, w=x)
    with pytest.raises(ValueError, match="pack_bf16: not a destination-passing kernel"):
        kernels.call("pack_bf16", out, kind="matmul", groups=1, w=x)


def test_error_kinds_cross_into_python_unchanged():
    matmul = tvm_ffi.get_global_func("kokoro_tvm_ext.matmul")
    x = tvm.runtime.tensor(np.zeros((2, 3), np.float32))
    w = tvm.runtime.tensor(np.zeros((4, 5), np.float32))
    out = tvm.runtime.tensor(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match=r"matmul: w: expected shape \[3, 5\], got \[4, 5\]"):
        matmul(0, x, w, out)
    with pytest.raises(TypeError, match="matmul: x: expected dtype float32, got float64"):
        matmul(0, tvm.runtime.tensor(np.zeros((2, 3))), w, out)
    with pytest.raises(ValueError, match="matmul: has_bias: expected 0 or 1, got 2"):
        matmul(2, x, w, out)
    snake = tvm_ffi.get_global_func("kokoro_tvm_ext.snake")
    x3 = tvm.runtime.tensor(np.ones((1, 2, 3), np.float32))
    with pytest.raises(ValueError, match="snake: out: output memory overlaps input x"):
        snake(x3, tvm.runtime.tensor(np.ones((1, 2, 1), np.float32)), x3)
    # And through the pyo3 module, which maps the kinds in src/error.rs.
    with pytest.raises(KeyError, match="no kernel named"):
        _native.kernel_interface("conv2d")
    assert '"global": "kokoro_tvm_ext.snake"' in _native.kernel_interface("snake")
