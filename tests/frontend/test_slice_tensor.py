"""slice.Tensor on symbolic axes, or with symbolic bounds: shapes stay known, values match torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402


class Slices(torch.nn.Module):
    """Slices on a symbolic axis, including a derived one (2·L), each reshaped with -1."""

    def forward(self, x, y):
        t = y.shape[1]
        x = x.reshape(2, -1)  # the sliced axis is 2·L
        parts = [
            x[:, 1:-1],  # negative end
            x[:, -1:],  # negative start
            x[:, :-2],
            x[:, 2:],
            x[:, -5::2],  # negative start with a step
            x[:, :t],  # BERT's position_ids[:, :T]: the end is another input's size
            x[:, 1 : t + 1],
        ]
        # Edge-replicated neighbours (Kokoro's linear upsampling): stock TVM
        # gives these slices min/max shapes it cannot match up, and loses the
        # shape at the broadcast.
        padded = torch.cat([x[:, :1], x, x[:, -1:]], dim=-1)
        parts.append(padded[:, :-2] * 0.25 + padded[:, 1:-1] * 0.5 + padded[:, 2:] * 0.25)
        # A reshape with -1 needs a known shape.
        return tuple(p.reshape(2, -1) for p in parts)


L = torch.export.Dim("L", min=4, max=512)
T = torch.export.Dim("T", min=1, max=6)


@pytest.fixture(scope="module")
def exported():
    x = torch.randn(2, 10, 2)
    y = torch.randn(2, 4)
    return torch.export.export(Slices(), (x, y), dynamic_shapes=({1: L}, {1: T}))


def test_slices_keep_symbolic_shapes_and_match_torch(exported):
    mod = kokoro_tvm_ext.from_exported_program(exported)
    ret = mod["main"].ret_ty
    for field in ret.fields:
        assert field.shape is not None, f"shape lost: {field}"
    vm = build_vm(mod)
    for n, t in ((8, 1), (37, 6)):
        x = torch.randn(2, n, 2)
        y = torch.randn(2, t)
        want = Slices()(x, y)
        got = run_vm(vm, x.numpy(), y.numpy())
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())


def test_stock_slice_loses_the_shape(exported):
    """The failure our converter fixes: stock conversion cannot reshape the slice."""
    from tvm.relax.frontend.torch import from_exported_program

    with pytest.raises(Exception, match="known shape"):
        from_exported_program(exported)


class Embeddings(torch.nn.Module):
    """BERT's embeddings: a fixed [1, 512] position buffer sliced by the input's length."""

    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", torch.arange(512).expand(1, -1), persistent=False)
        self.words = torch.nn.Embedding(30, 8)
        self.positions = torch.nn.Embedding(512, 8)

    def forward(self, ids):
        position_ids = self.position_ids[:, : ids.shape[1]]
        return self.words(ids) + self.positions(position_ids), position_ids


@pytest.fixture(scope="module")
def bert_exported():
    with torch.no_grad():
        return torch.export.export(
            Embeddings().eval(),
            (torch.randint(0, 30, (2, 7)),),
            dynamic_shapes=({1: torch.export.Dim("T", max=512)},),
        )


def test_static_buffer_sliced_by_a_symbolic_length_keeps_its_shape(bert_exported):
    mod = kokoro_tvm_ext.from_exported_program(bert_exported)
    emb, pos = mod["main"].ret_ty.fields
    assert emb.shape is not None and pos.shape is not None and int(pos.shape[0]) == 1
    assert str(pos.shape[1]) == str(emb.shape[1])  # [1, T] with the input's T
    vm = build_vm(mod)
    reference = bert_exported.module()
    for t in (1, 7, 512):
        ids = torch.randint(0, 30, (2, t))
        got = run_vm(vm, ids.numpy())
        with torch.no_grad():
            want = reference(ids)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.numpy())


def test_stock_position_ids_slice_fails_to_build(bert_exported):
    """NOTES §2: the shape is lost at the slice and the build fails at the add."""
    from tvm.relax.frontend.torch import from_exported_program

    with pytest.raises(Exception, match="CodeGenVM cannot emit"):
        build_vm(from_exported_program(bert_exported))
