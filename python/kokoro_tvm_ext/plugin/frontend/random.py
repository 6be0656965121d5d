"""``rand`` / ``rand_like`` / ``randn`` / ``randn_like``: seeded noise of any (symbolic) shape.

Stock TVM 0.27 has no ``rand``/``rand_like`` ("Unsupported function types
['rand.default']"), and its ``randn``/``randn_like`` draw a numpy array at
import time and embed it as a constant, so they need static shapes
(``int(s)`` of a size variable fails) and differ from one import to the next.

Here noise is a pure function of (seed, node, element): element ``i`` of a
random node is Philox4x32-10 (Salmon et al., SC'11; cuRAND's default, and
PyTorch's on CUDA) of the counter ``i`` under a key drawn
from (seed, which random node of the graph it is). A counter-based generator
runs elementwise in one TIR kernel, for any shape, in parallel. Uniform floats
keep the top mantissa bits (24 for float32), so they lie in [0, 1) exactly as
torch's; normals use Box-Muller.

Philox only multiplies 32-bit words (in uint64, so nothing overflows): TVM's
LLVM codegen marks unsigned multiplies ``nuw``, and a 64-bit hash that relies
on wrap-around (SplitMix64) was folded to a constant by LLVM.

What this cannot do is match torch's generator: the numbers differ from
``torch.manual_seed(s); torch.rand(...)``, and every call of the compiled
function returns the same noise for the same seed (the seed is fixed at import,
``from_exported_program(..., random_seed=...)``). A model whose output must
match torch, or which needs fresh noise per call, should take the noise as an
explicit input instead; Kokoro's adapters do that for SineGen
(``kokoro/decoder.py``).
"""

from __future__ import annotations

import math
import weakref

from tvm import te, tirx

from kokoro_tvm_ext.plugin.frontend.common import output_dtype
from kokoro_tvm_ext.plugin.frontend.symbolic import to_prim

MASK32 = 0xFFFFFFFF
MASK64 = (1 << 64) - 1
PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
PHILOX_ROUNDS = 10
MANTISSA_BITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}

_NODES_SEEN: weakref.WeakKeyDictionary[object, int] = weakref.WeakKeyDictionary()


def philox_key(seed: int, stream: int) -> tuple[int, int]:
    """The Philox key of the ``stream``-th random node: SplitMix64 of (seed, stream), in Python."""
    z = (seed + (stream + 1) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z & MASK32, z >> 32


def _u64(value: int) -> tirx.PrimExpr:
    return tirx.const(value, "uint64")


def _philox(counter: tirx.PrimExpr, key: tuple[int, int], body):
    """``body(words)`` with ``words`` the four 32-bit outputs (uint64 PrimExprs) of
    Philox4x32-10 for the 64-bit ``counter``; products are shared through Lets."""
    counter = tirx.Cast("uint64", counter)
    c = [counter & _u64(MASK32), counter >> _u64(32), _u64(0), _u64(0)]
    k0, k1 = key
    lets = []
    for r in range(PHILOX_ROUNDS):
        p0 = tirx.Var(f"p0_{r}", "uint64")
        p1 = tirx.Var(f"p1_{r}", "uint64")
        lets += [(p0, _u64(PHILOX_M[0]) * c[0]), (p1, _u64(PHILOX_M[1]) * c[2])]  # < 2**64
        c = [
            (p1 >> _u64(32)) ^ c[1] ^ _u64(k0),
            p1 & _u64(MASK32),
            (p0 >> _u64(32)) ^ c[3] ^ _u64(k1),
            p0 & _u64(MASK32),
        ]
        k0, k1 = (k0 + PHILOX_W[0]) & MASK32, (k1 + PHILOX_W[1]) & MASK32
    out = body(c)
    for var, value in reversed(lets):
        out = tirx.Let(var, value, out)
    return out


def _unit(hi: tirx.PrimExpr, lo: tirx.PrimExpr | None, dtype: str, open_at_zero=False):
    """The top mantissa bits of the 64-bit word hi:lo as a float in [0, 1)
    (or (0, 1] with ``open_at_zero``), exactly representable in ``dtype``."""
    n = MANTISSA_BITS[dtype]
    if n <= 32:
        top = hi >> _u64(32 - n)
    else:
        top = (hi << _u64(n - 32)) | (lo >> _u64(64 - n))
    if open_at_zero:
        top = top + _u64(1)
    return tirx.Cast(dtype, top) * tirx.const(2.0**-n, dtype)


def _flat_index(shape, idx) -> tirx.PrimExpr:
    flat = tirx.IntImm("int64", 0)
    for extent, i in zip(shape, idx):
        flat = flat * extent + tirx.Cast("int64", i)
    return flat


def _uniform_te(shape, dtype: str, key):
    def value(*idx):
        return _philox(_flat_index(shape, idx), key, lambda w: _unit(w[0], w[1], dtype))

    return te.compute(shape, value, name="rand")


def _normal_te(shape, dtype: str, key):
    work = "float64" if dtype == "float64" else "float32"

    def box_muller(w):
        u1 = _unit(w[0], w[1], work, open_at_zero=True)  # log(0) never happens
        u2 = _unit(w[2], w[3], work)
        radius = tirx.sqrt(tirx.const(-2.0, work) * tirx.log(u1))
        normal = radius * tirx.cos(tirx.const(2.0 * math.pi, work) * u2)
        return normal if work == dtype else tirx.Cast(dtype, normal)

    return te.compute(shape, lambda *idx: _philox(_flat_index(shape, idx), key, box_muller), name="randn")


def _shape(node, importer, like: bool):
    if like:
        shape = importer.env[node.args[0]].ty.shape
        if shape is not None:
            return list(shape)
    else:
        sizes = importer.retrieve_args(node)[0]
        sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
        return [to_prim(importer, s) for s in sizes]
    return [to_prim(importer, d) for d in node.meta["val"].shape]


def _next_stream(importer) -> int:
    stream = _NODES_SEEN.get(importer, 0)
    _NODES_SEEN[importer] = stream + 1
    return stream


def random_converters(seed: int = 0) -> dict:
    """The random-op converters for one import, drawing from ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"random_seed must be an int, got {seed!r}")

    def make(make_te, like: bool, name: str):
        def convert(node, importer):
            dtype = output_dtype(node)
            if dtype not in MANTISSA_BITS:
                raise TypeError(f"{node.target}: random {dtype} is not supported")
            key = philox_key(seed & MASK64, _next_stream(importer))
            shape = _shape(node, importer, like)
            return importer.block_builder.emit(
                importer.block_builder.call_te(make_te, shape, dtype, key, primfunc_name_hint=name)
            )

        return convert

    return {
        "rand.default": make(_uniform_te, False, "rand"),
        "rand_like.default": make(_uniform_te, True, "rand"),
        "randn.default": make(_normal_te, False, "randn"),
        "randn_like.default": make(_normal_te, True, "randn"),
    }


__all__ = ["MANTISSA_BITS", "PHILOX_M", "PHILOX_ROUNDS", "PHILOX_W", "philox_key", "random_converters"]
