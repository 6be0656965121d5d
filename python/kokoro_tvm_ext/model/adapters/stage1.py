"""Stage 1: tokens → durations and the features the alignment needs (symbolic T).

``TextStage(model)`` reuses hexgrad's submodules and weights; only the glue is
ours, rewritten so that torch.export keeps T symbolic:
- every LSTM runs through the plugin op with per-sample ``lengths`` instead of
  pack/pad (so a padded batch item equals its solo run);
- ALBERT gets explicit ``position_ids`` and ``token_type_ids``, which avoids
  slicing its registered buffers to ``[:, :T]`` (that slice loses the symbolic
  shape in TVM);
- in-place ``masked_fill_`` becomes out-of-place;
- ``speed`` is a per-item tensor input instead of a Python float.

Inputs: ``input_ids`` int64 [B, T] (padding anywhere past each length),
``input_lengths`` int64 [B], ``ref_s`` float32 [B, 256], ``speed`` float32 [B].
Outputs: ``pred_dur`` int64 [B, T] (0 past each length), ``d`` float32
[B, T, hidden+style] (the prosody features), ``t_en`` float32 [B, hidden, T]
(the text features).
"""

from __future__ import annotations

import torch
from torch import nn

from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM
from kokoro_tvm_ext.plugin.torch_lstm import use_plugin_lstm


def duration_encoder(enc, x, style, lengths, pad_mask):
    """kokoro.modules.DurationEncoder.forward with the LSTM fed lengths."""
    from kokoro.modules import AdaLayerNorm

    x = x.permute(2, 0, 1)
    s = style.expand(x.shape[0], x.shape[1], -1)
    x = torch.cat([x, s], dim=-1)
    x = x.masked_fill(pad_mask.unsqueeze(-1).transpose(0, 1), 0.0)
    x = x.transpose(0, 1).transpose(-1, -2)
    for block in enc.lstms:
        if isinstance(block, AdaLayerNorm):
            x = block(x.transpose(-1, -2), style).transpose(-1, -2)
            x = torch.cat([x, s.permute(1, 2, 0)], dim=1)
            x = x.masked_fill(pad_mask.unsqueeze(-1).transpose(-1, -2), 0.0)
        else:
            x, _ = block(x.transpose(-1, -2), lengths=lengths)
            x = x.transpose(-1, -2)
    return x.transpose(-1, -2)


def text_encoder(enc, input_ids, lengths, pad_mask):
    """kokoro.modules.TextEncoder.forward with the LSTM fed lengths."""
    m = pad_mask.unsqueeze(1)
    x = enc.embedding(input_ids).transpose(1, 2).masked_fill(m, 0.0)
    for block in enc.cnn:
        x = block(x).masked_fill(m, 0.0)
    x, _ = enc.lstm(x.transpose(1, 2), lengths=lengths)
    return x.transpose(-1, -2).masked_fill(m, 0.0)


class TextStage(nn.Module):
    def __init__(self, model):
        super().__init__()
        use_plugin_lstm(model)
        self.bert = model.bert
        self.bert_encoder = model.bert_encoder
        self.predictor = model.predictor
        self.text_encoder = model.text_encoder

    def forward(self, input_ids, input_lengths, ref_s, speed):
        batch, steps = input_ids.shape
        positions = torch.arange(steps, device=input_ids.device).unsqueeze(0)
        pad_mask = positions >= input_lengths.unsqueeze(1)
        bert_dur = self.bert(
            input_ids,
            attention_mask=(~pad_mask).int(),
            position_ids=positions.expand(batch, steps),
            token_type_ids=torch.zeros_like(input_ids),
        )
        d_en = self.bert_encoder(bert_dur).transpose(-1, -2)
        s = ref_s[:, 128:]
        d = duration_encoder(self.predictor.text_encoder, d_en, s, input_lengths, pad_mask)
        x, _ = self.predictor.lstm(d, lengths=input_lengths)
        duration = torch.sigmoid(self.predictor.duration_proj(x)).sum(dim=-1) / speed.unsqueeze(1)
        pred_dur = torch.round(duration).clamp(min=1).long().masked_fill(pad_mask, 0)
        t_en = text_encoder(self.text_encoder, input_ids, input_lengths, pad_mask)
        return pred_dur, d, t_en


# The adapter's parameter names -> KModel's state-dict names (the stage keeps KModel's submodules).
CHECKPOINT_NAMES = (("", ""),)

MAX_BATCH = 64  # items per text-stage call; KokoroTVM splits larger batches


def export_text_stage(stage: TextStage, max_tokens: int = MAX_TOKENS):
    """torch.export with symbolic batch and T (1 ≤ T ≤ max_tokens + 2: the ids include both boundary ids).

    TVM sizes some buffers by these bounds (``tir_var_upper_bound``), so they must cover
    every call: a bound of max_tokens left 509 and 510 tokens one int64 short."""
    steps = torch.export.Dim("T", min=1, max=max_tokens + 2)
    batch = torch.export.Dim("B", min=1, max=MAX_BATCH)
    example = (
        torch.ones(2, 8, dtype=torch.int64),
        torch.tensor([8, 5], dtype=torch.int64),
        torch.zeros(2, STYLE_DIM),
        torch.ones(2),
    )
    shapes = ({0: batch, 1: steps}, {0: batch}, {0: batch}, {0: batch})
    return torch.export.export(stage, example, dynamic_shapes=shapes)
