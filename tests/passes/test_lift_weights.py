"""LiftWeights: large constants become trailing parameters, stored in weights.bin and mapped back."""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from kokoro_tvm_ext.passes.lift_weights import lift_weights
from kokoro_tvm_ext.runtime.weights import load_weights, write_weights


def _tensor(shape, seed=0, dtype="float32"):
    return tvm.runtime.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _module(big, big_again, small):
    """main(x) = (x + big) * small + big_again, where big and big_again hold the same constant."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4, 1024], "float32"))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.add(x, big))
        y = bb.emit(relax.op.multiply(y, small))
        y = bb.emit(relax.op.add(y, big_again))
        bb.emit_func_output(y)
    return bb.get()


def test_large_constants_become_parameters_and_small_ones_stay():
    big_value, small_value = _tensor((4, 1024)), _tensor((1, 1024), seed=1)  # 16 KB and 4 KB
    big = relax.const(big_value)
    before = _module(big, big, relax.const(small_value))
    sink = {}
    after = lift_weights(sink, min_bytes=8192)(before)

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4, 1024], "float32"))
    w = relax.Var("weight0", relax.TensorType([4, 1024], "float32"))
    with bb.function("main", [x, w]):
        y = bb.emit(relax.op.add(x, w))
        y = bb.emit(relax.op.multiply(y, relax.const(small_value)))
        y = bb.emit(relax.op.add(y, w))  # the same constant twice: one parameter
        bb.emit_func_output(y)
    tvm.ir.assert_structural_equal(after, bb.get(), map_free_vars=True)
    assert len(sink["main"]) == 1 and sink["main"][0].same_as(big_value)


def test_a_function_without_large_constants_is_unchanged():
    before = _module(relax.const(_tensor((4, 1024))), relax.const(_tensor((4, 1024), 2)), relax.const(_tensor((1, 1024))))
    sink = {}
    after = lift_weights(sink, min_bytes=1 << 20)(before)
    tvm.ir.assert_structural_equal(after, before)
    assert sink == {"main": []}


def test_weights_file_round_trip_keeps_bytes_dtypes_alignment_and_sharing(tmp_path):
    f32 = _tensor((3, 5, 7))
    i64 = tvm.runtime.tensor(np.arange(9, dtype=np.int64).reshape(3, 3))
    bits = np.random.default_rng(2).integers(0, 1 << 16, (6, 10), dtype=np.uint16)
    bf16 = tvm.runtime.tensor(bits)._create_view((6, 10), "bfloat16")
    f32_copy = tvm.runtime.tensor(f32.numpy())  # another tensor, the same bytes
    index = write_weights(tmp_path / "weights.bin", {"a": [f32, i64], "b": [bf16, f32_copy]})
    assert [e[0] % 64 for entries in index.values() for e in entries] == [0, 0, 0, 0]
    assert index["a"][0] == index["b"][1]  # stored once
    assert (tmp_path / "weights.bin").stat().st_size < f32.numpy().nbytes * 2
    loaded = load_weights(tmp_path / "weights.bin", index, tvm)
    np.testing.assert_array_equal(loaded["a"][0].numpy(), f32.numpy())
    np.testing.assert_array_equal(loaded["a"][1].numpy(), i64.numpy())
    assert str(loaded["b"][0].dtype) == "bfloat16" and tuple(loaded["b"][0].shape) == (6, 10)
    np.testing.assert_array_equal(loaded["b"][0]._create_view((6, 10), "uint16").numpy(), bits)
    assert loaded["b"][1] is loaded["a"][0]  # one mapping, one tensor


def test_a_compiled_module_runs_the_same_on_mapped_weights(tmp_path):
    torch = pytest.importorskip("torch")
    import kokoro_tvm_ext
    from kokoro_tvm_ext.compile import default_target
    from kokoro_tvm_ext.passes.pipeline import cpu_pipeline

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(16, 32, 3, padding=1)
            self.linear = torch.nn.Linear(32, 24)

        def forward(self, x):
            return self.linear(torch.tanh(self.conv(x)).transpose(1, 2))

    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(1, 16, 37)
    mod = kokoro_tvm_ext.from_exported_program(torch.export.export(model, (x,)))
    target = tvm.target.Target(default_target())
    sink = {}
    lifted = relax.VirtualMachine(tvm.compile(mod, target, relax_pipeline=cpu_pipeline(target, weights=sink)),
                                  tvm.cpu())
    index = write_weights(tmp_path / "weights.bin", sink)
    weights = load_weights(tmp_path / "weights.bin", index, tvm)
    assert sum(int(np.prod(w.shape)) for w in weights["main"]) >= 32 * 16 * 3  # the conv weight at least

    out = lifted["main"](tvm.runtime.tensor(x.numpy()), *weights["main"])
    got = (out[0] if not isinstance(out, tvm.runtime.Tensor) else out).numpy()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
