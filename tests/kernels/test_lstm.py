"""The LSTM, both implementations, against torch.nn.LSTM with packed sequences."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from tvm_build import build_vm, run_vm  # noqa: E402

import kokoro_tvm_ext  # noqa: E402

IMPLS = ["plugin", "tir"]
T_DIM = torch.export.Dim("T", min=1, max=1024)


class WithLengths(nn.Module):
    """An nn.LSTM driven with lengths (and optionally h0/c0), exportable after use_plugin_lstm."""

    def __init__(self, lstm: nn.LSTM, with_state: bool):
        super().__init__()
        self.lstm, self.with_state = lstm, with_state

    def forward(self, x, lengths, h0, c0):
        hx = (h0, c0) if self.with_state else None
        y, (h_n, c_n) = self.lstm(x, hx, lengths=lengths)
        return y, h_n, c_n


def torch_reference(lstm: nn.LSTM, x, lengths, hx):
    """nn.LSTM on pack_padded_sequence, padded back to the full T."""
    with torch.no_grad():
        batch_first = lstm.batch_first
        if lengths is None:
            y, (h, c) = lstm(x, hx)
            return y, h, c
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first, enforce_sorted=False)
        y, (h, c) = lstm(packed, hx)
        total = x.shape[1] if batch_first else x.shape[0]
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first, total_length=total)
        return y, h, c


# (input, hidden, layers, bidirectional, batch_first, lengths at the first T, with h0/c0)
CASES = {
    "kokoro-512": (512, 256, 1, True, True, [9], False),
    "kokoro-640-batch4": (640, 256, 1, True, True, [9, 3, 1, 6], False),
    "2-layers-state": (24, 16, 2, True, False, [5, 2], True),
    "3-layers-uni": (12, 8, 3, False, True, [4, 4, 1], False),
    "3-layers-bi-state": (12, 8, 3, True, True, [6, 1, 3, 6], True),
}


def make_case(name: str):
    I, H, L, bidir, batch_first, lengths, with_state = CASES[name]  # noqa: E741 (torch's names)
    torch.manual_seed(len(name))
    ref = nn.LSTM(I, H, num_layers=L, bidirectional=bidir, batch_first=batch_first).eval()
    plugin = nn.LSTM(I, H, num_layers=L, bidirectional=bidir, batch_first=batch_first).eval()
    plugin.load_state_dict(ref.state_dict())
    kokoro_tvm_ext.use_plugin_lstm(plugin)
    return ref, WithLengths(plugin, with_state), lengths


def inputs(ref: nn.LSTM, steps: int, lengths: list[int], seed: int):
    g = torch.Generator().manual_seed(seed)
    B = len(lengths)
    shape = (B, steps, ref.input_size) if ref.batch_first else (steps, B, ref.input_size)
    x = torch.randn(*shape, generator=g)
    D = 2 if ref.bidirectional else 1
    h0 = torch.randn(ref.num_layers * D, B, ref.hidden_size, generator=g)
    c0 = torch.randn(ref.num_layers * D, B, ref.hidden_size, generator=g)
    return x, torch.tensor(lengths, dtype=torch.int64), h0, c0


def build(mod, impl: str = "plugin"):
    """build_vm, with the kernels on for impl="plugin" (its LSTM op legalizes to TIR without them)."""
    if impl != "plugin":
        return build_vm(mod)
    with kokoro_tvm_ext.kernels_enabled():
        return build_vm(mod)


_BUILT: dict = {}


def built(name: str, impl: str):
    """One export + build per (case, impl), shared by the tests of this module."""
    key = (name, impl)
    if key not in _BUILT:
        ref, model, lengths = make_case(name)
        x, lens, h0, c0 = inputs(ref, max(lengths), lengths, seed=0)
        time_axis = 1 if ref.batch_first else 0
        ep = torch.export.export(model, (x, lens, h0, c0), dynamic_shapes=({time_axis: T_DIM}, None, None, None))
        mod = kokoro_tvm_ext.from_exported_program(ep, lstm_impl=impl)
        _BUILT[key] = (ref, model, lengths, build(mod, impl), mod)
    return _BUILT[key]


def assert_matches(ref, vm, with_state, x, lens, h0, c0):
    hx = (h0, c0) if with_state else None
    want = torch_reference(ref, x, lens, hx)
    got = run_vm(vm, x.numpy(), lens.numpy(), h0.numpy(), c0.numpy())
    for name, g, w in zip(("y", "h_n", "c_n"), got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=2e-5, err_msg=name)
    return got


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch_at_two_lengths_from_one_build(name, impl):
    ref, model, lengths, vm, _ = built(name, impl)
    # The build's own T, then a longer T with the sequences scaled up.
    for steps, lens_list in ((max(lengths), lengths), (2 * max(lengths) + 3, [2 * n + 3 for n in lengths])):
        x, lens, h0, c0 = inputs(ref, steps, lens_list, seed=steps)
        got = assert_matches(ref, vm, model.with_state, x, lens, h0, c0)
        y = got[0] if ref.batch_first else got[0].transpose(1, 0, 2)
        for b, n in enumerate(lens_list):
            assert not y[b, n:].any(), "outputs past a sequence's length must be zero"


@pytest.mark.parametrize("impl", IMPLS)
def test_single_step_sequence(impl):
    ref, model, _, vm, _ = built("kokoro-640-batch4", impl)
    x, lens, h0, c0 = inputs(ref, 1, [1, 1, 1, 1], seed=5)
    assert_matches(ref, vm, model.with_state, x, lens, h0, c0)


@pytest.mark.parametrize("impl", IMPLS)
def test_ir_size_does_not_depend_on_t(impl):
    ref, model, _, _, _ = built("kokoro-512", impl)

    def ir_lines(steps):
        x, lens, h0, c0 = inputs(ref, steps, [steps], seed=1)
        ep = torch.export.export(model, (x, lens, h0, c0))  # static T
        return len(kokoro_tvm_ext.from_exported_program(ep, lstm_impl=impl).script().splitlines())

    assert ir_lines(16) == ir_lines(256)


def test_custom_op_eager_matches_packed_nn_lstm():
    ref, model, lengths = make_case("3-layers-bi-state")
    x, lens, h0, c0 = inputs(ref, 8, [8, 2, 5, 1], seed=3)
    with torch.no_grad():
        got = model(x, lens, h0, c0)
    for g, w in zip(got, torch_reference(ref, x, lens, (h0, c0))):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_plugin_lstm_still_accepts_packed_sequences():
    ref, model, _ = make_case("kokoro-512")
    x, lens, _, _ = inputs(ref, 6, [6, 4], seed=4)
    packed = nn.utils.rnn.pack_padded_sequence(x, lens, True, enforce_sorted=False)
    with torch.no_grad():
        got, (h, _) = model.lstm(packed)
        want, (hr, _) = ref(packed)
    torch.testing.assert_close(got.data, want.data)
    torch.testing.assert_close(h, hr)


def test_plain_nn_lstm_exports_with_symbolic_t_after_use_plugin_lstm():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 4, batch_first=True, bidirectional=True)

        def forward(self, x):
            return self.lstm(x)[0]

    model = kokoro_tvm_ext.use_plugin_lstm(Plain().eval())
    ep = torch.export.export(model, (torch.randn(1, 5, 8),), dynamic_shapes=({1: T_DIM},))
    mod = kokoro_tvm_ext.from_exported_program(ep)
    main_params = mod["main"].params
    assert not main_params[0].ty.shape[1].__class__.__name__.startswith("IntImm"), "T was specialized"
    vm = build(mod)
    for steps in (3, 17):
        x = torch.randn(1, steps, 8)
        with torch.no_grad():
            want = model(x)
        np.testing.assert_allclose(run_vm(vm, x.numpy()), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
def test_upstream_aten_lstm_becomes_one_call(impl):
    """Without use_plugin_lstm, aten.lstm.input is kept whole and converted by us."""
    lstm = nn.LSTM(10, 6, num_layers=2, bidirectional=True).eval()
    x = torch.randn(12, 2, 10)
    ep = torch.export.export(lstm, (x,))
    mod = kokoro_tvm_ext.from_exported_program(ep, lstm_impl=impl)
    assert len(mod.script().splitlines()) < 150
    with torch.no_grad():
        want = lstm(x)
    got = run_vm(build(mod, impl), x.numpy())
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(got[1], want[1][0].numpy(), rtol=1e-5, atol=2e-5)


def test_conversion_rejects_non_float32_input():
    model = kokoro_tvm_ext.use_plugin_lstm(nn.LSTM(4, 3, batch_first=True).double().eval())
    ep = torch.export.export(model, (torch.randn(1, 5, 4, dtype=torch.float64),))
    with pytest.raises(TypeError, match="lstm: input must be float32, got float64"):
        kokoro_tvm_ext.from_exported_program(ep)


def test_unknown_impl_is_refused():
    ep = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(ValueError, match="lstm_impl must be one of"):
        kokoro_tvm_ext.from_exported_program(ep, lstm_impl="cuda")
