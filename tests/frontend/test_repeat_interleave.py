"""repeat_interleave.Tensor against torch, with data-dependent output length."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import export_and_build, run_vm  # noqa: E402


class Indices(torch.nn.Module):
    def forward(self, repeats):
        return torch.repeat_interleave(repeats)


class Align(torch.nn.Module):
    """Kokoro's alignment: token features repeated by their predicted durations."""

    def forward(self, features, durations):
        idx = torch.repeat_interleave(torch.arange(features.shape[0]), durations)
        return features[idx]


T = torch.export.Dim("T", min=1, max=510)


@pytest.fixture(scope="module")
def indices_vm():
    vm, _ = export_and_build(Indices(), (torch.tensor([1, 2, 3]),), dynamic_shapes=({0: T},))
    return vm


@pytest.mark.parametrize(
    "repeats",
    [[1, 2, 3], [0, 4, 0, 1], [5], [0, 0, 2], list(range(7, 0, -1)) * 30],
)
def test_indices_match_torch(indices_vm, repeats):
    r = torch.tensor(repeats, dtype=torch.int64)
    want = torch.repeat_interleave(r).numpy()
    got = run_vm(indices_vm, r.numpy())
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_int32_repeats_keep_their_dtype():
    vm, _ = export_and_build(Indices(), (torch.tensor([1, 2, 3], dtype=torch.int32),), dynamic_shapes=({0: T},))
    r = torch.tensor([2, 0, 1, 4], dtype=torch.int32)
    got = run_vm(vm, r.numpy())
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, torch.repeat_interleave(r).numpy())


def test_alignment_gather_matches_torch_at_two_lengths():
    F = torch.export.Dim("F", min=1, max=510)
    feats = torch.randn(4, 8)
    durs = torch.tensor([2, 0, 3, 1])
    vm, _ = export_and_build(Align(), (feats, durs), dynamic_shapes=({0: F}, {0: F}))
    for n in (3, 50):
        feats = torch.randn(n, 8)
        durs = torch.randint(0, 6, (n,))
        durs[0] = 1
        want = Align()(feats, durs).numpy()
        got = run_vm(vm, feats.numpy(), durs.numpy())
        np.testing.assert_array_equal(got, want)
