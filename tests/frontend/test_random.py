"""rand / rand_like / randn / randn_like: seeded Philox noise of symbolic shape.

torch's generator cannot be matched, so these check the generator against a
numpy Philox4x32-10 written here (itself checked on Random123's known-answer
vectors), the distributions, [0, 1) ranges, shapes, dtypes and seeding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.plugin.frontend.random import PHILOX_M, PHILOX_W, philox_key  # noqa: E402


def philox4x32_10(counters: np.ndarray, key: tuple[int, int]) -> list[np.ndarray]:
    """Philox4x32-10 of counters (ctr = [lo, hi, 0, 0]), the textbook round."""
    u = np.uint64
    c = [counters & u(0xFFFFFFFF), counters >> u(32), np.zeros_like(counters), np.zeros_like(counters)]
    k0, k1 = key
    for _ in range(10):
        p0, p1 = u(PHILOX_M[0]) * c[0], u(PHILOX_M[1]) * c[2]
        lo0, lo1 = p0 & u(0xFFFFFFFF), p1 & u(0xFFFFFFFF)
        c = [(p1 >> u(32)) ^ c[1] ^ u(k0), lo1, (p0 >> u(32)) ^ c[3] ^ u(k1), lo0]
        k0, k1 = (k0 + PHILOX_W[0]) & 0xFFFFFFFF, (k1 + PHILOX_W[1]) & 0xFFFFFFFF
    return c


def test_reference_philox_matches_random123_known_answers():
    def kat(ctr, key):
        c = philox4x32_10(np.array([ctr[0] | ctr[1] << 32], np.uint64), key)
        return [int(w[0]) for w in c]

    # ctr words 2 and 3 are zero in our use; Random123's all-zero vector covers it.
    assert kat((0, 0), (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


class Noise(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (
            torch.rand(n, 3),
            torch.rand_like(x),
            torch.randn_like(x),
            torch.randn(n, 2, dtype=torch.float64),
            torch.rand(n, dtype=torch.float16),
        )


N = torch.export.Dim("N", min=1, max=1 << 20)


@pytest.fixture(scope="module")
def exported():
    return torch.export.export(Noise(), (torch.zeros(4, 3),), dynamic_shapes=({0: N},))


@pytest.fixture(scope="module")
def vm_seed0(exported):
    return build_vm(kokoro_tvm_ext.from_exported_program(exported, random_seed=0))


def test_bits_match_the_reference(vm_seed0):
    rows = 1000
    rand, rand_like, _, randn64, _ = run_vm(vm_seed0, np.zeros((rows, 3), np.float32))
    for stream, got in ((0, rand), (1, rand_like)):
        w = philox4x32_10(np.arange(rows * 3, dtype=np.uint64), philox_key(0, stream))
        want = (w[0] >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24)
        np.testing.assert_array_equal(got.reshape(-1), want)
    # float64 normals: 53-bit uniforms from words (0, 1) and (2, 3), Box-Muller.
    w = philox4x32_10(np.arange(rows * 2, dtype=np.uint64), philox_key(0, 3))
    u1 = (((w[0] << np.uint64(21)) | (w[1] >> np.uint64(11))) + np.uint64(1)).astype(np.float64) * 2.0**-53
    u2 = ((w[2] << np.uint64(21)) | (w[3] >> np.uint64(11))).astype(np.float64) * 2.0**-53
    want = np.sqrt(-2 * np.log(u1)) * np.cos(2 * math.pi * u2)
    np.testing.assert_allclose(randn64.reshape(-1), want, rtol=1e-12, atol=1e-12)


def _ks_statistic(sorted_samples: np.ndarray, cdf) -> float:
    n = len(sorted_samples)
    f = cdf(sorted_samples)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def test_distributions_shapes_and_dtypes(vm_seed0):
    rows = 40000
    rand, rand_like, randn_like, randn64, rand16 = run_vm(vm_seed0, np.zeros((rows, 3), np.float32))
    assert [o.shape for o in (rand, rand_like, randn_like, randn64, rand16)] == [
        (rows, 3),
        (rows, 3),
        (rows, 3),
        (rows, 2),
        (rows,),
    ]
    dtypes = [o.dtype for o in (rand, randn_like, randn64, rand16)]
    assert dtypes == [np.float32, np.float32, np.float64, np.float16]
    # KS bound: 1.63 / sqrt(n) is the 1% critical value.
    for u in (rand, rand_like, rand16.astype(np.float32)):
        assert u.min() >= 0 and u.max() < 1
        assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
        flat = np.sort(u.reshape(-1).astype(np.float64))
        assert _ks_statistic(flat, lambda v: v) < 1.63 / math.sqrt(len(flat)) + 2.0**-11
    normal_cdf = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2))))
    for z in (randn_like, randn64):
        assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02
        flat = np.sort(z.reshape(-1).astype(np.float64))
        assert _ks_statistic(flat, normal_cdf) < 1.63 / math.sqrt(len(flat))
    # Neighbours and different random nodes are uncorrelated.
    assert abs(np.corrcoef(rand.reshape(-1)[:-1], rand.reshape(-1)[1:])[0, 1]) < 0.02
    assert abs(np.corrcoef(rand.reshape(-1), rand_like.reshape(-1))[0, 1]) < 0.02
    # Two lengths: a prefix of the longer run (element i depends on i only).
    short = run_vm(vm_seed0, np.zeros((5, 3), np.float32))
    np.testing.assert_array_equal(short[1], rand_like[:5])


def test_seeded_and_deterministic(exported, vm_seed0):
    import tvm_ffi

    x = np.zeros((64, 3), np.float32)
    first = run_vm(vm_seed0, x)
    for a, b in zip(first, run_vm(vm_seed0, x)):
        np.testing.assert_array_equal(a, b)  # every call, the same noise
    again = kokoro_tvm_ext.from_exported_program(exported, random_seed=0)
    assert tvm_ffi.structural_equal(again, kokoro_tvm_ext.from_exported_program(exported, random_seed=0))
    other = run_vm(build_vm(kokoro_tvm_ext.from_exported_program(exported, random_seed=1)), x)
    for a, b in zip(first, other):
        assert not np.array_equal(a, b)


def test_stock_tvm_has_no_rand(exported):
    from tvm.relax.frontend.torch import from_exported_program

    with pytest.raises(AssertionError, match="rand.default"):
        from_exported_program(exported)
