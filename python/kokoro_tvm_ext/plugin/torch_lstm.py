"""The LSTM as one opaque torch op, so torch.export keeps T symbolic.

``torch.export`` specializes the time dimension while it decomposes
``aten.lstm``, and cannot trace a PackedSequence at all. The custom op
``kokoro_tvm_ext::lstm`` hides the recurrence behind a fake (shape-only)
implementation, carries per-sample ``lengths`` with packed-sequence semantics,
and converts to a single call of the plugin kernel (see frontend/lstm.py).

Weights are passed flat, per layer then per direction:
``w_ih, w_hh[, b_ih, b_hh]`` — the order of ``nn.LSTM._flat_weights``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


@torch.library.custom_op("kokoro_tvm_ext::lstm", mutates_args=())
def lstm(
    x: Tensor,
    lengths: Tensor | None,
    h0: Tensor | None,
    c0: Tensor | None,
    weights: list[Tensor],
    num_layers: int,
    bidirectional: bool,
    batch_first: bool,
    has_biases: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """Eager kernel: PyTorch's own LSTM on a packed sequence, padded back to T."""
    batch_dim, time_dim = (0, 1) if batch_first else (1, 0)
    B, T = x.shape[batch_dim], x.shape[time_dim]
    D = 2 if bidirectional else 1
    H = weights[1].shape[1]
    if h0 is None:
        h0 = x.new_zeros(num_layers * D, B, H)
        c0 = x.new_zeros(num_layers * D, B, H)
    if lengths is None:
        y, h_n, c_n = torch._VF.lstm(
            x, (h0, c0), weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first
        )
        return y.contiguous(), h_n.contiguous(), c_n.contiguous()
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first, enforce_sorted=False)
    order, unorder = packed.sorted_indices, packed.unsorted_indices
    y, h_n, c_n = torch._VF.lstm(
        packed.data,
        packed.batch_sizes,
        (h0.index_select(1, order), c0.index_select(1, order)),
        weights,
        has_biases,
        num_layers,
        0.0,
        False,
        bidirectional,
    )
    padded, _ = nn.utils.rnn.pad_packed_sequence(
        nn.utils.rnn.PackedSequence(y, packed.batch_sizes, order, unorder), batch_first, total_length=T
    )
    return padded.contiguous(), h_n.index_select(1, unorder), c_n.index_select(1, unorder)


@lstm.register_fake
def _lstm_fake(x, lengths, h0, c0, weights, num_layers, bidirectional, batch_first, has_biases):
    D = 2 if bidirectional else 1
    H = weights[1].shape[1]
    B = x.shape[0] if batch_first else x.shape[1]
    y = x.new_empty(*x.shape[:2], D * H)
    state = x.new_empty(num_layers * D, B, H)
    return y, state, state.clone()


class PluginLSTM(nn.LSTM):
    """``nn.LSTM`` whose forward runs through ``kokoro_tvm_ext::lstm``.

    Same parameters and state_dict keys as ``nn.LSTM``. ``forward`` takes a
    padded tensor plus optional ``lengths`` (int64 [B]); in eager mode it also
    takes a PackedSequence and returns one.
    """

    def forward(self, x, hx=None, lengths: Tensor | None = None):
        if self.proj_size:
            raise NotImplementedError("kokoro_tvm_ext.lstm does not support proj_size")
        if isinstance(x, nn.utils.rnn.PackedSequence):
            padded, lengths = nn.utils.rnn.pad_packed_sequence(x, self.batch_first)
            y, state = self.forward(padded, hx, lengths)
            return nn.utils.rnn.pack_padded_sequence(y, lengths, self.batch_first, enforce_sorted=False), state
        h0, c0 = hx if hx is not None else (None, None)
        y, h_n, c_n = lstm(
            x,
            lengths,
            h0,
            c0,
            # By name, not ``self._flat_weights``: torch.export tracks parameters as module attributes, and
            # tensors reached through that list would be captured as constants (a compiled library could
            # then not take another checkpoint's LSTM weights).
            [getattr(self, name) for name in self._flat_weights_names],
            self.num_layers,
            self.bidirectional,
            self.batch_first,
            self.bias,
        )
        return y, (h_n, c_n)


def use_plugin_lstm(model: nn.Module) -> nn.Module:
    """Make every ``nn.LSTM`` in ``model`` (in place) a :class:`PluginLSTM`.

    Parameters and state_dict keys are unchanged. After this, ``torch.export``
    keeps the time dimension symbolic. Returns the model. Dropout between
    layers is not applied, as in eval mode.
    """
    for module in model.modules():
        if type(module) is nn.LSTM:
            module.__class__ = PluginLSTM
    return model
