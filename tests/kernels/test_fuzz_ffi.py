"""Random calls of every registered kernel from Python, through tvm_ffi (issue #20).

Each kernel gets random shapes (lengths 0 and 1, odd channel counts) with inputs
as strided numpy views and outputs as plain tensors, compared with numpy; then
wrong dtypes, wrong ranks, unaligned and strided buffers, an int for a tensor, a
wrong argument count and an output sharing an input's memory, each of which must
raise ValueError or TypeError naming the argument. The Rust property tests
(`cargo test -p tvm-ext random_calls`) cover the same ground with more cases.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np
import pytest
import tvm
import tvm_ffi

CASES = 8


def fn(name: str):
    return tvm.get_global_func(f"kokoro_tvm_ext.{name}")


def view(rng: np.random.Generator, a: np.ndarray):
    """`a` as a tensor over a strided, offset numpy view (no copy into TVM's allocator)."""
    if a.ndim == 0 or a.size == 0 or rng.integers(3) == 0:
        return tvm_ffi.from_dlpack(np.ascontiguousarray(a))
    order = rng.permutation(a.ndim)
    big = np.full(tuple(d + 1 for d in np.array(a.shape)[order]), np.nan, a.dtype)
    inner = big[tuple(slice(1, None) for _ in order)]
    v = inner.transpose(np.argsort(order))
    v[...] = a
    return tvm_ffi.from_dlpack(v)


def out_like(shape) -> tvm.runtime.Tensor:
    return tvm.runtime.tensor(np.full(shape, np.nan, np.float32))


def unaligned(a: np.ndarray):
    """`a` at an address one byte past an aligned one."""
    buf = np.zeros(a.nbytes + 8, np.uint8)
    u = np.frombuffer(buf.data, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
    u[...] = a
    return tvm_ffi.from_dlpack(u)


@contextmanager
def raises(name: str):
    """The block raises ValueError or TypeError whose message names `name`."""
    with pytest.raises((ValueError, TypeError)) as info:
        yield
    msg = str(info.value)
    assert re.search(rf"(^|\s){re.escape(name)}(:|\[|$)", msg), f"{name!r} not named in: {msg}"


def size(rng, hi: int) -> int:
    return int(rng.choice([0, 1, rng.integers(0, hi + 1)]))


def check_mutations(rng, kernel, scalars: list, tensors: list[tuple[str, np.ndarray]], outs: list[tuple], any_rank=()):
    """Run the common mutations: every input and output in turn made wrong (`any_rank`: no rank check)."""
    base = [tvm.runtime.tensor(a) for _, a in tensors]
    outputs = [out_like(s) for _, s in outs]

    def call(replace: dict[int, object]):
        args = list(scalars) + base + outputs
        for k, v in replace.items():
            args[len(scalars) + k] = v
        return kernel(*args)

    named = [n for n, _ in tensors] + [n for n, _ in outs]
    arrays = [a for _, a in tensors] + [np.zeros(s, np.float32) for _, s in outs]
    for k, (name, a) in enumerate(zip(named, arrays)):
        wrong = a.astype(np.float64) if a.dtype != np.float64 else a.astype(np.float32)
        with raises(name):
            call({k: tvm.runtime.tensor(wrong)})
        if name not in any_rank:
            with raises(name):
                call({k: tvm.runtime.tensor(a[..., None])})
        with raises(name):
            call({k: 1})
        if a.size:
            with raises(name):
                call({k: unaligned(a)})
    for k, (name, shape) in enumerate(outs):
        j = len(tensors) + k
        if any(d > 1 for d in shape[:-1]) and np.prod(shape):
            gapped = np.zeros(tuple(shape[:-1]) + (shape[-1] + 1,), np.float32)[..., :-1]
            with raises(name):
                call({j: tvm_ffi.from_dlpack(gapped)})
        # Sharing memory with the first float32 input big enough to hold it.
        for t, (_, a) in enumerate(tensors):
            if a.dtype == np.float32 and a.size >= np.prod(shape) > 0:
                mem = a.copy()
                shared = tvm_ffi.from_dlpack(mem.reshape(-1)[: np.prod(shape)].reshape(shape))
                with raises(name):
                    call({t: tvm_ffi.from_dlpack(mem), j: shared})
                break
    with pytest.raises(ValueError, match="expected"):
        kernel(*(list(scalars) + base + outputs)[:-1])


def test_snake(rng):
    snake = fn("snake")
    for _ in range(CASES):
        b, c, n = size(rng, 3), int(rng.integers(1, 8)) | 1, size(rng, 40)
        x = rng.standard_normal((b, c, n)).astype(np.float32) * 3
        alpha = (rng.uniform(0.2, 2.0, (1, c, 1)) * rng.choice([-1, 1], (1, c, 1))).astype(np.float32)
        out = out_like((b, c, n))
        snake(view(rng, x), view(rng, alpha), out)
        x64, a64 = x.astype(np.float64), alpha.astype(np.float64)
        np.testing.assert_allclose(out.numpy(), x64 + np.sin(a64 * x64) ** 2 / a64, rtol=1e-5, atol=1e-5)
        check_mutations(rng, snake, [], [("x", x), ("alpha", alpha)], [("out", (b, c, n))])


def test_adain(rng):
    adain = fn("adain")
    for _ in range(CASES):
        b, c, n = size(rng, 3), int(rng.integers(1, 8)) | 1, size(rng, 40)
        act, affine, eps, slope = int(rng.integers(3)), int(rng.integers(2)), 1e-5, 0.2
        x = (rng.standard_normal((b, c, n)) + 0.5).astype(np.float32)
        nw, nb = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
        scale, shift = (rng.standard_normal((b, c, 1)).astype(np.float32) for _ in range(2))
        alpha = rng.uniform(0.2, 2.0, (1, c, 1)).astype(np.float32)
        tensors = [("x", x)] + ([("norm_w", nw), ("norm_b", nb)] if affine else [])
        tensors += [("scale", scale), ("shift", shift)] + ([("alpha", alpha)] if act == 1 else [])
        out = out_like((b, c, n))
        adain(act, affine, eps, slope, *[view(rng, a) for _, a in tensors], out)
        x64 = x.astype(np.float64)
        if n:
            y = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + eps)
            if affine:
                y = y * nw[:, None] + nb[:, None]
            y = scale * y + shift
            if act == 1:
                y = y + np.sin(alpha * y) ** 2 / alpha
            elif act == 2:
                y = np.where(y > 0, y, slope * y)
            np.testing.assert_allclose(out.numpy(), y, rtol=1e-4, atol=1e-4)
        check_mutations(rng, adain, [act, affine, eps, slope], tensors, [("out", (b, c, n))])
        with raises("act"):
            adain(3, affine, eps, slope, *[tvm.runtime.tensor(a) for _, a in tensors], out)


def conv_reference(x, w, bias, stride, pad_l, pad_r, dilation, groups, transpose=False, output_padding=0):
    x, w = x.astype(np.float64), w.astype(np.float64)
    b, cin, n = x.shape
    k = w.shape[2]
    if transpose:
        cout_g = w.shape[1]
        cin_g = cin // groups
        lout = (n - 1) * stride - pad_l - pad_r + dilation * (k - 1) + output_padding + 1
        full = np.zeros((b, cout_g * groups, (n - 1) * stride + dilation * (k - 1) + 1 + output_padding))
        for g in range(groups):
            xg = x[:, g * cin_g : (g + 1) * cin_g]
            wg = w[g * cin_g : (g + 1) * cin_g]
            for t in range(n):
                for j in range(k):
                    full[:, g * cout_g : (g + 1) * cout_g, t * stride + j * dilation] += np.einsum(
                        "bc,co->bo", xg[:, :, t], wg[:, :, j]
                    )
        y = full[:, :, pad_l : pad_l + lout]
        y = np.pad(y, ((0, 0), (0, 0), (0, lout - y.shape[2])))
    else:
        cout, cin_g = w.shape[0], w.shape[1]
        cout_g = cout // groups
        xp = np.pad(x, ((0, 0), (0, 0), (pad_l, pad_r)))
        lout = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
        y = np.zeros((b, cout, lout))
        for g in range(groups):
            xg = xp[:, g * cin_g : (g + 1) * cin_g]
            wg = w[g * cout_g : (g + 1) * cout_g]
            for j in range(k):
                cols = xg[:, :, j * dilation : j * dilation + (lout - 1) * stride + 1 : stride]
                y[:, g * cout_g : (g + 1) * cout_g] += np.einsum("bct,oc->bot", cols, wg[:, :, j])
    if bias is not None:
        y += bias[None, :, None]
    return y


def random_conv(rng, transpose):
    while True:
        g = int(rng.integers(1, 4))
        cin, cout = g * int(rng.integers(1, 5)), g * int(rng.integers(1, 5))
        b, n, k = size(rng, 2), size(rng, 16), int(rng.integers(1, 6))
        s, d = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        pl, pr = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        op = int(rng.integers(0, max(s, d))) if transpose else 0
        lout = (n - 1) * s - pl - pr + d * (k - 1) + op + 1 if transpose else (n + pl + pr - d * (k - 1) - 1) // s + 1
        if lout >= 1 and (transpose or n + pl + pr >= d * (k - 1) + 1):
            return b, cin, cout, n, k, s, pl, pr, d, g, op, lout


@pytest.mark.parametrize("transpose", [False, True])
def test_conv1d(rng, transpose):
    kernel = fn("conv1d_transpose" if transpose else "conv1d")
    for _ in range(CASES):
        b, cin, cout, n, k, s, pl, pr, d, g, op, lout = random_conv(rng, transpose)
        has_bias = int(rng.integers(2))
        x = rng.standard_normal((b, cin, n)).astype(np.float32)
        w_shape = (cin, cout // g, k) if transpose else (cout, cin // g, k)
        w = rng.standard_normal(w_shape).astype(np.float32)
        bias = rng.standard_normal(cout).astype(np.float32)
        scalars = [s, pl, pr] + ([op] if transpose else []) + [d, g, has_bias]
        tensors = [("x", x), ("w", w)] + ([("bias", bias)] if has_bias else [])
        out = out_like((b, cout, lout))
        kernel(*scalars, *[view(rng, a) for _, a in tensors], out)
        want = conv_reference(x, w, bias if has_bias else None, s, pl, pr, d, g, transpose, op)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
        check_mutations(rng, kernel, scalars, tensors, [("out", (b, cout, lout))])
        tv = [tvm.runtime.tensor(a) for _, a in tensors]
        with raises("stride"):
            kernel(0, *scalars[1:], *tv, out)
        with raises("groups"):
            kernel(*scalars[:-2], 0, has_bias, *tv, out)


def test_matmul(rng):
    matmul = fn("matmul")
    for _ in range(CASES):
        lead = tuple(size(rng, 3) for _ in range(int(rng.integers(0, 3))))
        k, n, has_bias = size(rng, 9), size(rng, 9), int(rng.integers(2))
        x = rng.standard_normal((*lead, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        tensors = [("x", x), ("w", w)] + ([("bias", bias)] if has_bias else [])
        out = out_like((*lead, n))
        matmul(has_bias, *[view(rng, a) for _, a in tensors], out)
        want = x.astype(np.float64) @ w + (bias if has_bias else 0)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
        check_mutations(rng, matmul, [has_bias], tensors, [("out", (*lead, n))], any_rank=("x",))


def test_batch_matmul(rng):
    bmm = fn("batch_matmul")
    for _ in range(CASES):
        batch = tuple(int(rng.integers(1, 4)) for _ in range(int(rng.integers(0, 3))))
        m, n, k = size(rng, 6), size(rng, 6), size(rng, 6)
        tx, ty = int(rng.integers(2)), int(rng.integers(2))
        xb = tuple(1 if rng.integers(3) == 0 else d for d in batch)
        x = rng.standard_normal((*xb, k, m) if tx else (*xb, m, k)).astype(np.float32)
        y = rng.standard_normal((*batch, n, k) if ty else (*batch, k, n)).astype(np.float32)
        out = out_like((*batch, m, n))
        bmm(tx, ty, view(rng, x), view(rng, y), out)
        x64 = np.swapaxes(x, -1, -2) if tx else x
        y64 = np.swapaxes(y, -1, -2) if ty else y
        want = x64.astype(np.float64) @ y64.astype(np.float64)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
        check_mutations(rng, bmm, [tx, ty], [("x", x), ("y", y)], [("out", (*batch, m, n))], any_rank=("x", "y"))


def test_lstm(rng):
    lstm = fn("lstm")
    torch = pytest.importorskip("torch")
    for _ in range(CASES // 2):
        layers, bidir, bf = int(rng.integers(1, 3)), int(rng.integers(2)), int(rng.integers(2))
        b, t, i, h = size(rng, 3), int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 8))
        ref = torch.nn.LSTM(i, h, layers, batch_first=bool(bf), bidirectional=bool(bidir))
        x = rng.standard_normal((b, t, i) if bf else (t, b, i)).astype(np.float32)
        weights = [("w", p.detach().numpy().copy()) for p in ref.parameters()]
        names = [n.split("_l")[0].replace("weight_", "w_").replace("bias_", "b_") for n, _ in ref.named_parameters()]
        tensors = [("x", x)] + [(n, w) for n, (_, w) in zip(names, weights)]
        d = 2 if bidir else 1
        outs = [("y", (b, t, d * h) if bf else (t, b, d * h)), ("h_n", (layers * d, b, h)), ("c_n", (layers * d, b, h))]
        scalars = [layers, bidir, bf, 1, 0, 0]
        got = [out_like(s) for _, s in outs]
        lstm(*scalars, *[view(rng, a) for _, a in tensors], *got)
        if b:
            with torch.no_grad():
                y, (hn, cn) = ref(torch.from_numpy(x))
            for g, want in zip(got, (y, hn, cn)):
                np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        check_mutations(rng, lstm, scalars, tensors, outs)


def test_winograd(rng):
    pack, conv = fn("pack_winograd"), fn("conv1d_winograd")
    for _ in range(CASES):
        k = int(rng.choice([3, 5, 7, 11]))
        b, cin, cout, n = size(rng, 2), int(rng.integers(1, 5)), int(rng.integers(1, 5)), size(rng, 30)
        d, pl, pr, has_bias = int(rng.integers(1, 4)), int(rng.integers(0, 12)), int(rng.integers(0, 12)), 1
        lout = n + pl + pr - d * (k - 1)
        if lout < 1:
            continue
        x = rng.standard_normal((b, cin, n)).astype(np.float32)
        w = rng.standard_normal((cout, cin, k)).astype(np.float32)
        bias = rng.standard_normal(cout).astype(np.float32)
        u = pack(view(rng, w)).numpy()
        out = out_like((b, cout, lout))
        scalars = [1, pl, pr, d, 1, has_bias, k]
        conv(*scalars, view(rng, x), view(rng, u), view(rng, bias), out)
        want = conv_reference(x, w, bias, 1, pl, pr, d, 1)
        np.testing.assert_allclose(out.numpy(), want, rtol=5e-4, atol=5e-4)
        with raises("w"):
            pack(tvm.runtime.tensor(w[:, :, :2].copy()))
        with raises("w"):
            pack(unaligned(w))
        check_mutations(rng, conv, scalars, [("x", x), ("w", u), ("bias", bias)], [("out", (b, cout, lout))])
        with raises("stride"):
            conv(2, *scalars[1:], *[tvm.runtime.tensor(a) for a in (x, u, bias)], out)


def bf16_round(a: np.ndarray) -> np.ndarray:
    """Round to nearest even bf16, as float32."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def test_bf16(rng):
    pack, native = fn("pack_bf16"), fn("bf16_native")
    is_native = bool(native())
    with raises("bf16_native"):
        native(1)
    for case in range(CASES):
        transpose = case % 2 == 1
        b, cin, cout, n, k, s, pl, pr, d, g, op, lout = random_conv(rng, transpose)
        has_bias = 1
        x = rng.standard_normal((b, cin, n)).astype(np.float32)
        w_shape = (cin, cout // g, k) if transpose else (cout, cin // g, k)
        w = rng.standard_normal(w_shape).astype(np.float32)
        bias = rng.standard_normal(cout).astype(np.float32)
        kind = "conv1d_transpose" if transpose else "conv1d"
        wp = pack(kind, g, view(rng, w))
        with raises("kind"):
            pack("conv2d", g, tvm.runtime.tensor(w))
        with raises("w"):
            pack(kind, g, tvm.runtime.tensor(w.astype(np.float64)))
        kernel = fn(kind + "_bf16")
        scalars = [s, pl, pr] + ([op] if transpose else []) + [d, g, has_bias, k]
        out = out_like((b, cout, lout))
        kernel(*scalars, view(rng, x), wp, view(rng, bias), out)
        xr = bf16_round(x) if is_native else x
        want = conv_reference(xr, bf16_round(w), bias, s, pl, pr, d, g, transpose, op)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
        xt, bt = tvm.runtime.tensor(x), tvm.runtime.tensor(bias)
        with raises("w"):
            kernel(*scalars, xt, tvm.runtime.tensor(w), bt, out)
        if x.size:
            with raises("x"):
                kernel(*scalars, unaligned(x), wp, bt, out)
        with raises("out"):
            kernel(*scalars, xt, wp, bt, 1)
    rows, kk, n = size(rng, 4), int(rng.integers(1, 9)), int(rng.integers(1, 40))
    x = rng.standard_normal((rows, kk)).astype(np.float32)
    w = rng.standard_normal((kk, n)).astype(np.float32)
    out = out_like((rows, n))
    fn("matmul_bf16")(0, view(rng, x), pack("matmul", 1, tvm.runtime.tensor(w)), out)
    want = (bf16_round(x) if is_native else x).astype(np.float64) @ bf16_round(w)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    with raises("groups"):
        pack("matmul", 2, tvm.runtime.tensor(w))
