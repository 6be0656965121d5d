"""Two imported programs in one library: no clash on `main`, each callable by name."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kokoro_tvm_ext  # noqa: E402
from tvm_build import build_vm, run_vm  # noqa: E402
from kokoro_tvm_ext.passes.merge_modules import merge_modules  # noqa: E402


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


class LSTMish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 3, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0] + 1


@pytest.mark.parametrize("impl", ["plugin", "tir"])
def test_merged_modules_keep_their_entries_apart(impl):
    lstm = kokoro_tvm_ext.use_plugin_lstm(LSTMish().eval())
    a = kokoro_tvm_ext.from_exported_program(torch.export.export(Double(), (torch.ones(2),)))
    # The TIR LSTM brings helper PrimFuncs whose names would clash across stages.
    b = kokoro_tvm_ext.from_exported_program(torch.export.export(lstm, (torch.ones(1, 5, 4),)), lstm_impl=impl)
    c = kokoro_tvm_ext.from_exported_program(torch.export.export(lstm, (torch.ones(1, 5, 4),)), lstm_impl=impl)
    merged = merge_modules({"first": a, "second": b, "third": c})
    names = {gv.name_hint for gv in merged.get_global_vars()}
    assert {"first", "second", "third"} <= names and "main" not in names
    vm = build_vm(merged)
    x = np.arange(2, dtype=np.float32)
    np.testing.assert_array_equal(run_vm(vm, x, fn="first"), x * 2)
    seq = torch.randn(1, 5, 4)
    with torch.no_grad():
        want = lstm(seq).numpy()
    np.testing.assert_allclose(run_vm(vm, seq.numpy(), fn="third"), want, rtol=1e-5, atol=1e-5)


def test_name_collision_is_reported():
    a = kokoro_tvm_ext.from_exported_program(torch.export.export(Double(), (torch.ones(2),)))
    lstm = kokoro_tvm_ext.use_plugin_lstm(LSTMish().eval())
    b = kokoro_tvm_ext.from_exported_program(torch.export.export(lstm, (torch.ones(1, 5, 4),)), lstm_impl="tir")
    clash = "s__kokoro_lstm_recurrence_h3_fwd"
    with pytest.raises(ValueError, match=f"two functions named {clash}"):
        merge_modules({clash: a, "s": b})
