"""The PyTorch reference: hexgrad's own ``KModel.forward_with_tokens``, fed our noise.

``SineGen`` draws its random initial phases with ``torch.rand`` and its noise
with ``torch.randn_like``. To give PyTorch exactly the noise the compiled
artifact gets (``decoder.make_noise``, numpy, seeded), ``InjectedNoise`` is a
``TorchFunctionMode``: while it is active those two calls return our arrays
instead of drawing. The model's code runs unmodified.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from kokoro_tvm_ext.model.adapters.decoder import make_noise
from kokoro_tvm_ext.model.spec import MAX_TOKENS, SAMPLE_RATE, add_boundary_ids, strip_boundary_ids


class InjectedNoise(TorchFunctionMode):
    """Serve SineGen's ``rand`` / ``randn_like`` from given arrays.

    ``phase_noise`` [B, H] answers ``torch.rand(B, H)``; ``sine_noise``
    [B, H, F, S] answers ``randn_like`` of SineGen's [B, F·S, H] tensor (a
    transposed view, filled in memory order). Other ``randn_like`` calls
    (the source module's unused noise branch) get zeros.
    """

    def __init__(self, phase_noise: np.ndarray, sine_noise: np.ndarray):
        super().__init__()
        self.phase = torch.from_numpy(np.ascontiguousarray(phase_noise))
        b, h, f, s = sine_noise.shape
        self.sine = torch.from_numpy(np.ascontiguousarray(sine_noise)).reshape(b, h, f * s).transpose(1, 2)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.rand:
            return self.phase.clone().to(kwargs.get("dtype") or torch.float32)
        if func is torch.randn_like:
            like = args[0]
            if tuple(like.shape) == tuple(self.sine.shape):
                return self.sine.to(like.dtype).clone()
            return torch.zeros_like(like)
        return func(*args, **kwargs)


def reference(model, tokens, style, speed: float = 1.0, noise_seed: int | None = 0, zero_noise: bool = False):
    """PyTorch KModel on ``tokens`` (int64 ids, with or without the boundary ids, as ``KokoroTVM``
    takes them) with our seeded noise.

    Returns ``(audio float32 [N], durations int64 [T])`` — T counts the two
    boundary ids that KModel adds around the tokens, as ``KokoroTVM`` does.
    """
    ids = _model_ids(tokens)
    ref_s = torch.as_tensor(np.asarray(style, dtype=np.float32)).reshape(1, -1)
    with torch.no_grad():
        # The frame count is only known after the durations; run the text half first.
        _, durations = _durations(model, ids, ref_s, speed)
        frames = int(durations.sum())
        noise = make_noise(frames, noise_seed, decoder=model.decoder, zero_noise=zero_noise)
        with InjectedNoise(noise["phase_noise"], noise["sine_noise"]):
            audio, pred_dur = model.forward_with_tokens(ids, ref_s, speed)
    return audio.numpy().astype(np.float32).reshape(-1), pred_dur.numpy().astype(np.int64).reshape(-1)


def _model_ids(tokens) -> torch.Tensor:
    """[1, T + 2] int64: the ids KModel.forward passes on, the boundary ids around the phoneme tokens."""
    return torch.from_numpy(add_boundary_ids(strip_boundary_ids(tokens))).reshape(1, -1)


def _durations(model, ids, ref_s, speed):
    """The duration half of forward_with_tokens (hexgrad's modules, our sequencing)."""
    lengths = torch.full((1,), ids.shape[-1], dtype=torch.long)
    pad_mask = torch.arange(ids.shape[-1]).unsqueeze(0) + 1 > lengths.unsqueeze(1)
    bert_dur = model.bert(ids, attention_mask=(~pad_mask).int())
    d_en = model.bert_encoder(bert_dur).transpose(-1, -2)
    d = model.predictor.text_encoder(d_en, ref_s[:, 128:], lengths, pad_mask)
    x, _ = model.predictor.lstm(d)
    duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speed
    return d, torch.round(duration).clamp(min=1).long().reshape(-1)


def reference_float64(
    model, tokens, style, durations, speed: float = 1.0, noise_seed: int | None = 0, zero_noise: bool = False
) -> np.ndarray:
    """Audio from a float64 copy of ``model``, aligned by the given ``durations``.

    The ground truth for judging audio: the decoder's harmonic-source phase
    sits on an atan2 branch cut, where float32 rounding flips phases, so
    float32 PyTorch itself is far from this (see shared/NOTES.md). Durations
    are integers and come from the float32 run, so both runs align alike.
    Uses hexgrad's modules in float64, with the decoder's exact
    ``torch.stft``/``istft`` formulation (decoder.ExportableDecoder).
    """
    from kokoro_tvm_ext.model.adapters.decoder import _copy_without_weight_norm

    ids = _model_ids(tokens)
    model64 = _copy_without_weight_norm(model).double()
    ref_s = torch.as_tensor(np.asarray(style, np.float32)).reshape(1, -1).double()
    dur = torch.as_tensor(np.asarray(durations, np.int64))
    # hexgrad's modules allocate scratch with torch.zeros(...) in the default dtype.
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return _float64_audio(model, model64, ids, ref_s, dur, speed, noise_seed, zero_noise)
    finally:
        torch.set_default_dtype(default_dtype)


def _float64_audio(model, model64, ids, ref_s, dur, speed, noise_seed, zero_noise):
    from kokoro_tvm_ext.model.adapters.decoder import ExportableDecoder

    with torch.no_grad():
        d, _ = _durations(model64, ids, ref_s, speed)
        lengths = torch.full((1,), ids.shape[-1], dtype=torch.long)
        pad_mask = torch.zeros_like(ids, dtype=torch.bool)
        index = torch.repeat_interleave(torch.arange(ids.shape[-1]), dur)
        en = d.transpose(-1, -2)[:, :, index]
        f0, n = model64.predictor.F0Ntrain(en, ref_s[:, 128:])
        asr = model64.text_encoder(ids, lengths, pad_mask)[:, :, index]
        frames = int(dur.sum())
        noise = make_noise(frames, noise_seed, decoder=model.decoder, zero_noise=zero_noise)
        decoder = ExportableDecoder(model64, stft="torch").double()
        audio = decoder(
            asr,
            f0.reshape(1, -1, 2),
            n.reshape(1, -1, 2),
            ref_s[:, :128],
            torch.from_numpy(noise["phase_noise"]).double(),
            torch.from_numpy(noise["sine_noise"]).double(),
        )
    return audio.numpy().reshape(-1)


class TorchKokoro:
    """hexgrad's KModel in PyTorch eager behind the runtime's interface (``iter_batch``, ``sample_rate``,
    ``max_tokens``), so a ``Speaker`` runs on it (``serve --backend torch``, the bench's PyTorch row).

    By default it is fed the artifact's noise (``reference``): the same audio as the artifact, up to float
    rounding. ``own_noise=True`` runs ``KModel.forward_with_tokens`` as its users call it, drawing its own
    noise from torch's generator seeded with the chunk's seed: PyTorch's own speed (no second pass of the
    text half to size the noise, no function mode on every op), and audio one noise draw away."""

    name = "torch"

    def __init__(self, model, num_threads: int | None = None, own_noise: bool = False):

        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.model = model
        self.own_noise = own_noise
        self.sample_rate = SAMPLE_RATE
        self.max_tokens = MAX_TOKENS

    def iter_batch(self, tokens_list, styles, speeds=None, noise_seeds=None):
        n = len(tokens_list)
        speeds = [1.0] * n if speeds is None else speeds
        noise_seeds = [0] * n if noise_seeds is None else noise_seeds
        for tokens, style, speed, seed in zip(tokens_list, styles, speeds, noise_seeds):
            if not self.own_noise:
                yield reference(self.model, tokens, style, speed=speed, noise_seed=seed)
                continue
            ids = torch.from_numpy(add_boundary_ids(strip_boundary_ids(np.asarray(tokens)))[None])
            torch.manual_seed(seed)
            with torch.no_grad():
                audio, durations = self.model.forward_with_tokens(ids, torch.from_numpy(style), float(speed))
            yield audio.numpy().reshape(-1), durations.numpy().astype(np.int64).reshape(-1)
