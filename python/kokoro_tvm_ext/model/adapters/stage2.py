"""Stage 2: aligned features → F0/N curves → audio (symbolic frame count F).

``AudioStage(model)`` runs hexgrad's ``ProsodyPredictor.F0Ntrain`` (its
``shared`` LSTM through the plugin op, its 2× nearest upsampling as an exact
expand/reshape instead of ``interpolate(scale_factor=2)``) and then the
exportable decoder (decoder.py). F0 and N stay inside the graph, so no input
has a derived dimension such as 2F.

Inputs: ``en`` float32 [B, hidden+style, F] (the aligned prosody features),
``asr`` float32 [B, hidden, F] (the aligned text features), ``ref_s`` float32
[B, 256], ``phase_noise`` [B, 9] and ``sine_noise`` [B, 9, F, 600] (see
``decoder.make_noise``). Output: audio float32 [B, 600·F].
"""

from __future__ import annotations

import torch
from torch import nn

from kokoro_tvm_ext.model.adapters.decoder import (
    ExportableDecoder,
    NearestUpsample2x,
    _copy_without_weight_norm,
    make_noise,
)
from kokoro_tvm_ext.plugin.torch_lstm import use_plugin_lstm


class AudioStage(nn.Module):
    def __init__(self, model):
        super().__init__()
        predictor = model.predictor
        # Copies: the caller's model keeps its own modules untouched.
        self.shared = use_plugin_lstm(_copy_without_weight_norm(predictor.shared))
        self.F0 = _copy_without_weight_norm(predictor.F0)
        self.N = _copy_without_weight_norm(predictor.N)
        self.F0_proj = _copy_without_weight_norm(predictor.F0_proj)
        self.N_proj = _copy_without_weight_norm(predictor.N_proj)
        for block in list(self.F0) + list(self.N):
            if block.upsample_type != "none":
                block.upsample = NearestUpsample2x()
        self.decoder = ExportableDecoder(model)

    def f0n(self, en, s):
        """``ProsodyPredictor.F0Ntrain``: F0 and N curves, each [B, 2F]."""
        x, _ = self.shared(en.transpose(-1, -2))
        f0 = x.transpose(-1, -2)
        for block in self.F0:
            f0 = block(f0, s)
        n = x.transpose(-1, -2)
        for block in self.N:
            n = block(n, s)
        return self.F0_proj(f0).squeeze(1), self.N_proj(n).squeeze(1)

    def forward(self, en, asr, ref_s, phase_noise, sine_noise):
        batch = en.shape[0]
        f0, n = self.f0n(en, ref_s[:, 128:])
        audio = self.decoder(
            asr, f0.reshape(batch, -1, 2), n.reshape(batch, -1, 2), ref_s[:, :128], phase_noise, sine_noise
        )
        return audio.reshape(batch, -1)


# The adapter's parameter names -> KModel's state-dict names (its copies of the predictor's parts and of
# the decoder, with weight norm folded; model/binding.py unfolds the pairs).
CHECKPOINT_NAMES = (
    ("shared.", "predictor.shared."),
    ("F0_proj.", "predictor.F0_proj."),
    ("N_proj.", "predictor.N_proj."),
    ("F0.", "predictor.F0."),
    ("N.", "predictor.N."),
    ("decoder.decoder.", "decoder."),
)


def export_audio_stage(stage: AudioStage, max_frames: int = 4096):
    """torch.export with a symbolic frame count (2 ≤ F ≤ max_frames), batch 1."""
    frames = torch.export.Dim("F", min=2, max=max_frames)
    f = 8
    noise = make_noise(f, 0, decoder=stage.decoder.decoder)
    example = (
        torch.randn(1, stage.shared.input_size, f),
        torch.randn(1, stage.decoder.decoder.asr_res[0].in_channels, f),
        torch.randn(1, 256),
        torch.from_numpy(noise["phase_noise"]),
        torch.from_numpy(noise["sine_noise"]),
    )
    shapes = ({2: frames}, {2: frames}, None, None, {2: frames})
    with torch.no_grad():
        return torch.export.export(stage.eval(), example, dynamic_shapes=shapes)
