"""The LSTM as the Relax op ``kokoro_tvm_ext.lstm``: typed by the Rust library, legalized by stock ``tvm.compile``
to the kernel with the kernels enabled and to the TIR implementation without. Numbers are checked against torch."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from torch import nn  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.plugin.frontend.lstm import LSTMCall, lstm_op  # noqa: E402
from kokoro_tvm_ext.plugin.passes.dispatch_kernels import DispatchToPluginKernels  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})
KERNEL_CALL = 'R.call_dps_packed("kokoro_tvm_ext.lstm"'
T_DIM = torch.export.Dim("T", min=1, max=256)
INPUT, HIDDEN, LAYERS = 6, 5, 2


class WithLengths(nn.Module):
    """A bidirectional 2-layer nn.LSTM on [T, B, I] driven with lengths and h0/c0 (after use_plugin_lstm)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS, bidirectional=True)

    def forward(self, x, lengths, h0, c0):
        y, (h_n, c_n) = self.lstm(x, (h0, c0), lengths=lengths)
        return y, h_n, c_n


class Plain(nn.Module):
    """The same LSTM, batch first, without lengths or state."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(INPUT, HIDDEN, num_layers=LAYERS, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, (h_n, c_n) = self.lstm(x)
        return y, h_n, c_n


def _inputs(case: str, steps: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    if case == "plain":
        return [torch.randn(2, steps, INPUT, generator=g)]
    lengths = torch.tensor([steps, max(1, steps // 2), 1])
    state = [torch.randn(2 * LAYERS, 3, HIDDEN, generator=g) for _ in range(2)]
    return [torch.randn(steps, 3, INPUT, generator=g), lengths, *state]


def _reference(model: nn.Module, case: str, args: list[torch.Tensor]) -> list[np.ndarray]:
    """torch's nn.LSTM itself, on a packed sequence padded back to T when there are lengths."""
    lstm = model.lstm
    with torch.no_grad():
        if case == "plain":
            y, (h, c) = lstm(args[0])
        else:
            x, lengths, h0, c0 = args
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
            y, (h, c) = lstm(packed, (h0, c0))
            y, _ = nn.utils.rnn.pad_packed_sequence(y, total_length=x.shape[0])
    return [t.numpy() for t in (y, h, c)]


_MODELS: dict = {}


def _imported(case: str):
    """(torch model, imported module), exported once per case with a symbolic T."""
    if case not in _MODELS:
        torch.manual_seed(0)
        model = kokoro_tvm_ext.use_plugin_lstm((Plain() if case == "plain" else WithLengths()).eval())
        time_axis = 1 if case == "plain" else 0
        dynamic = ({time_axis: T_DIM},) + (None,) * (0 if case == "plain" else 3)
        ep = torch.export.export(model, tuple(_inputs(case, 4, seed=0)), dynamic_shapes=dynamic)
        _MODELS[case] = (model, kokoro_tvm_ext.from_exported_program(ep))
    return _MODELS[case]


CASES = ["plain", "lengths-and-state"]


@pytest.mark.parametrize("case", CASES)
def test_imports_as_one_typed_op_call(case):
    _, mod = _imported(case)
    calls = [b.value for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call)]
    assert [c.op for c in calls] == [lstm_op()]
    y, h_n, c_n = calls[0].ty.fields
    time_dim = y.shape[1] if case == "plain" else y.shape[0]
    assert isinstance(time_dim, tvm.tirx.Var), "T was specialized"
    batch = 2 if case == "plain" else 3
    assert [int(d) for d in h_n.shape] == [int(d) for d in c_n.shape] == [2 * LAYERS, batch, HIDDEN]
    assert int(y.shape[2]) == 2 * HIDDEN and all(str(t.dtype) == "float32" for t in (y, h_n, c_n))
    assert "No TScriptPrinterName" not in mod.script()  # prints, without a warning


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "tir"])
def test_stock_compile_matches_torch_at_two_lengths(case, kernels):
    model, mod = _imported(case)
    if kernels:
        with kokoro_tvm_ext.kernels_enabled():
            legalized = relax.transform.LegalizeOps()(mod)
            ex = tvm.compile(mod, TARGET)
    else:
        legalized = relax.transform.LegalizeOps()(mod)
        ex = tvm.compile(mod, TARGET)
    text = legalized.script()
    if kernels:
        assert text.count(KERNEL_CALL) == 1 and "lstm_recurrence" not in text
    else:
        assert KERNEL_CALL not in text and "kokoro_lstm_recurrence" in text
        assert "kokoro_tvm_ext.lstm" not in ex.as_text(), "the TIR build must not need the plugin"
    vm = relax.VirtualMachine(ex, tvm.cpu())
    for steps in (4, 23):
        args = _inputs(case, steps, seed=steps)
        got = vm["main"](*(tvm.runtime.tensor(a.numpy()) for a in args))
        for name, g, w in zip(("y", "h_n", "c_n"), got, _reference(model, case, args)):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=2e-5, err_msg=f"{name} at T={steps}")


def test_our_pipeline_dispatches_the_op_to_the_kernel():
    _, mod = _imported("lengths-and-state")
    call = next(b.value for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call))
    dispatched = DispatchToPluginKernels()(mod)
    assert dispatched.script().count(KERNEL_CALL) == 1
    assert "kokoro_tvm_ext.lstm(" not in dispatched.script().replace(KERNEL_CALL, "")
    # The kernel takes the op's arguments as they are.
    kernel_call = next(b.value for b in dispatched["main"].body.blocks[0].bindings if isinstance(b.value, relax.Call))
    tvm.ir.assert_structural_equal(list(kernel_call.args[1].fields), list(call.args))


def _op_call(**changes) -> relax.Call:
    x = relax.Var("x", relax.TensorType([7, 2, 3], "float32"))
    weights = [
        relax.Var(name, relax.TensorType(shape, "float32"))
        for name, shape in (("w_ih", [16, 3]), ("w_hh", [16, 4]), ("b_ih", [16]), ("b_hh", [16]))
    ]
    fields = dict(x=x, lengths=None, h0=None, c0=None, weights=weights, num_layers=1)
    fields.update(bidirectional=False, batch_first=False, has_biases=True)
    fields.update(changes)
    return relax.Call(lstm_op(), LSTMCall(**fields).op_arguments())


def test_the_op_is_typed_from_its_arguments():
    ty = relax.BlockBuilder().normalize(_op_call()).ty
    tvm.ir.assert_structural_equal(
        ty,
        tvm.ir.TupleType([relax.TensorType([7, 2, 4], "float32")] + [relax.TensorType([1, 2, 4], "float32")] * 2),
    )


def test_the_op_refuses_what_the_kernel_cannot_take():
    bb = relax.BlockBuilder()
    x64 = relax.Var("x", relax.TensorType([7, 2, 3], "float64"))
    with pytest.raises(TypeError, match="kokoro_tvm_ext.lstm: x: expected a 3-D float32 tensor"):
        bb.normalize(_op_call(x=x64))
    short = _op_call()
    with pytest.raises(ValueError, match="b_hh is missing"):
        bb.normalize(relax.Call(short.op, list(short.args)[:-1]))
