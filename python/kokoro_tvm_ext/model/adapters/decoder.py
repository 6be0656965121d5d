"""Kokoro's iSTFTNet decoder, exportable with a symbolic frame count F.

``ExportableDecoder`` wraps a ``kokoro.istftnet.Decoder`` (hexgrad's kokoro
0.9.4, left untouched: we deep-copy it and re-wire the copy) so that
``torch.export`` keeps F symbolic and TVM's importer, with our converters,
takes the graph:

* **Explicit noise.** ``SineGen`` draws random initial phases (``torch.rand``)
  and additive noise (``torch.randn_like``). Both become inputs,
  ``phase_noise`` [B, 9] and ``sine_noise`` [B, 9, F, 600], so TVM and PyTorch
  can be fed the same values. ``make_noise`` draws them on the host (numpy,
  seeded; the default), ``make_noise(..., zero_noise=True)`` gives zeros (a
  deterministic decoder), and ``torch_noise`` replays the values kokoro itself
  draws after ``torch.manual_seed`` (the [B, 9, F, 600] layout is the memory
  order of the transposed tensor SineGen's ``randn_like`` fills).
  ``SourceModuleHnNSF`` also draws a noise branch that ``Generator`` never
  uses; it is dropped. With Kokoro's upsampling the initial-phase noise does
  not reach the output either (the ×1/300 linear downsampling reads samples
  149 and 150 of each 300-sample block, never sample 0); it stays an input
  for faithfulness.
* **No scale-factor resampling.** ``interpolate(scale_factor=...)`` puts
  ``sym_float``/``trunc`` guards into the export. Every resampling here has an
  integer ratio, so we write it with exact fixed-shape ops on the symbolic axis:
  nearest ×k is ``expand`` + ``reshape``; linear ×1/k (align_corners=False)
  is the mean of the two middle samples of each k-block; linear ×k uses
  k fixed interpolation weights per input sample. These equal
  ``interpolate(size=...)`` (bit-exact for the nearest and ×1/k cases, to
  rounding for ×k, where our weights are exact and torch's are computed in
  float32), see ``tests/kokoro/test_stage_decoder.py``.
* **No derived input dims.** F0 and N enter as [B, F, 2] (pairs of the
  [B, 2F] curves) and the noise as [B, 9, F, 600], so every input dimension is
  F itself; the graph reshapes them.
* **STFT / iSTFT** use the conv formulation of ``kokoro_tvm_ext.model.adapters.stft``
  (``stft="conv"``, the default). ``stft="torch"`` keeps ``torch.stft`` /
  ``torch.istft`` for eager references (e.g. a float64 ground truth).
* **The harmonic source runs in float64** (``source_dtype``, default
  ``torch.float64``): F0 upsampling, sine generation, the harmonic merge and
  the forward STFT, then a cast to float32 before ``noise_convs``. That path
  is ill-conditioned in float32: the sine phases reach 1e4 rad, and the STFT
  phase (``atan2``) of bins whose magnitude is rounding noise flips by up to
  2π, which is why PyTorch float32 differs from PyTorch float64 by 0.1 to 0.3
  (max abs) on this decoder. In float64 the build stays within ~1e-5 of a
  float64 reference. It is cheap: 9·600·F elementwise values and a 22-channel
  20-tap conv. ``source_dtype=None`` computes it in the input dtype instead.
* **Weight norm** is folded into plain weights in the copy
  (``remove_weight_norm`` computes the same ``g·v/‖v‖`` the forward hook
  would), so the compiled graph carries constants, not norms.

Shapes, for Kokoro-82M (hop 5, upsample rates 10·6, so 600 samples per frame):
``asr`` [B, 512, F], ``f0`` / ``n`` [B, F, 2], ``s`` [B, 128] → audio
[B, 1, 600·F].
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kokoro_tvm_ext.model.adapters.stft import ConvSTFT, TorchSTFT
from kokoro_tvm_ext.model.runtime.noise import make_noise as host_noise
from kokoro_tvm_ext.model.spec import HARMONICS, SAMPLES_PER_FRAME

#: Kokoro-82M's decoder hyper-parameters (config.json: ``hidden_dim``,
#: ``style_dim``, ``n_mels`` and ``istftnet``).
DECODER_CONFIG: dict = {
    "dim_in": 512,
    "style_dim": 128,
    "dim_out": 80,
    "resblock_kernel_sizes": [3, 7, 11],
    "upsample_rates": [10, 6],
    "upsample_initial_channel": 512,
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "upsample_kernel_sizes": [20, 12],
    "gen_istft_n_fft": 20,
    "gen_istft_hop_size": 5,
}


def build_decoder(seed: int = 0, config: dict | None = None) -> nn.Module:
    """A ``kokoro.istftnet.Decoder`` at Kokoro-82M's config with seeded random weights."""
    from kokoro.istftnet import Decoder

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        decoder = Decoder(**(config or DECODER_CONFIG))
    return decoder.eval()


def _decoder_of(model: nn.Module) -> nn.Module:
    """Accept a ``kokoro.KModel`` (use its ``.decoder``) or a decoder itself."""
    return getattr(model, "decoder", model)


def samples_per_frame(decoder: nn.Module) -> int:
    """Audio samples per decoder input frame (600 for Kokoro-82M)."""
    gen = _decoder_of(decoder).generator
    # F0 has 2 samples per frame, each upsampled by prod(upsample_rates) * hop.
    return 2 * gen.m_source.l_sin_gen.upsample_scale


def harmonics(decoder: nn.Module) -> int:
    return _decoder_of(decoder).generator.m_source.l_sin_gen.dim


def make_noise(
    num_frames: int,
    seed: int | None = 0,
    *,
    decoder: nn.Module | None = None,
    batch: int = 1,
    zero_noise: bool = False,
    dtype=np.float32,
) -> dict[str, np.ndarray]:
    """The decoder's noise inputs for ``num_frames`` frames (see ``runtime.noise.make_noise``),
    sized from ``decoder`` when given (9 harmonics, 600 samples per frame for Kokoro-82M)."""

    h = harmonics(decoder) if decoder is not None else HARMONICS
    s = samples_per_frame(decoder) if decoder is not None else SAMPLES_PER_FRAME
    return host_noise(
        num_frames, seed, harmonics=h, samples_per_frame=s, batch=batch, zero_noise=zero_noise, dtype=dtype
    )


def torch_noise(
    num_frames: int, seed: int, *, batch: int = 1, decoder: nn.Module | None = None, dtype: torch.dtype = torch.float32
) -> dict[str, np.ndarray]:
    """The noise kokoro's ``SineGen`` draws after ``torch.manual_seed(seed)``, in our layout.

    ``rand(B, 9)`` (float32) for the initial phases, then ``randn_like`` of the
    [B, 600·F, 9] sine tensor, which is a transposed view of [B, 9, 600·F]
    (``randn_like`` keeps that layout and fills it element by element). Pass
    ``dtype=torch.float64`` for what a float64 copy of the model draws.
    """
    h = harmonics(decoder) if decoder is not None else 9
    s = samples_per_frame(decoder) if decoder is not None else 600
    gen = torch.Generator().manual_seed(seed)
    phase = torch.rand(batch, h, generator=gen)
    like = torch.empty(batch, h, num_frames * s, dtype=dtype).transpose(1, 2)
    noise = torch.empty_like(like).normal_(generator=gen)
    return {"phase_noise": phase.numpy(), "sine_noise": noise.transpose(1, 2).reshape(batch, h, num_frames, s).numpy()}


# --- exact integer-ratio resampling on a symbolic axis -----------------------


def upsample_nearest(x: torch.Tensor, k: int) -> torch.Tensor:
    """``interpolate(x, size=k·L, mode="nearest")`` for x [B, C, L]: each sample k times."""
    b, c, _ = x.shape
    return x.unsqueeze(-1).expand(b, c, x.shape[-1], k).reshape(b, c, -1)


def downsample_linear(x: torch.Tensor, k: int) -> torch.Tensor:
    """``interpolate(x, size=L//k, mode="linear")`` for x [B, C, L] with L = k·M, k even.

    Output m samples the input at (m + ½)·k − ½, halfway between samples
    k·m + k/2 − 1 and k·m + k/2; torch weights both by ½.
    """
    if k % 2:
        raise ValueError("downsample_linear: odd ratios sample between other points")
    b, c, _ = x.shape
    blocks = x.reshape(b, c, -1, k)
    return blocks[..., k // 2 - 1] * 0.5 + blocks[..., k // 2] * 0.5


def _upsample_linear_weights(k: int) -> np.ndarray:
    """Weights of x[m-1], x[m], x[m+1] for output k·m + r, r = 0..k-1: [3, k], float64."""
    r = np.arange(k)
    offset = (r + 0.5) / k - 0.5  # source position relative to m
    w = np.zeros((3, k))
    left = offset < 0
    w[0, left] = -offset[left]
    w[1, left] = 1 + offset[left]
    w[1, ~left] = 1 - offset[~left]
    w[2, ~left] = offset[~left]
    return w


def upsample_linear(x: torch.Tensor, k: int, weights: torch.Tensor) -> torch.Tensor:
    """``interpolate(x, size=k·L, mode="linear")`` for x [B, C, L].

    ``weights`` is ``_upsample_linear_weights(k)`` as a tensor [3, k]. Source
    positions before the first / after the last sample clamp to the end
    samples, as torch does, which edge-replication of x gives.
    """
    b, c, _ = x.shape
    padded = torch.cat([x[..., :1], x, x[..., -1:]], dim=-1)
    prev, cur, nxt = padded[..., :-2], padded[..., 1:-1], padded[..., 2:]
    w = weights.to(x.dtype)
    out = (prev.unsqueeze(-1) * w[0] + cur.unsqueeze(-1) * w[1]) + nxt.unsqueeze(-1) * w[2]
    return out.reshape(b, c, -1)


class NearestUpsample2x(nn.Module):
    """Replaces ``kokoro.istftnet.UpSample1d('...')`` (``interpolate(scale_factor=2)``)."""

    def forward(self, x):
        return upsample_nearest(x, 2)


# --- the wrapper --------------------------------------------------------------


class ExportableDecoder(nn.Module):
    """``kokoro.istftnet.Decoder`` with explicit noise and a symbolic frame count.

    ``forward(asr, f0, n, s, phase_noise, sine_noise)``:
    ``asr`` [B, 512, F], ``f0``/``n`` [B, F, 2] (``F0_pred``/``N_pred``
    reshaped), ``s`` [B, 128] (``ref_s[:, :128]``), ``phase_noise`` [B, 9],
    ``sine_noise`` [B, 9, F, 600] → audio [B, 1, 600·F].
    """

    def __init__(self, model: nn.Module, stft: str = "conv", source_dtype: torch.dtype | None = torch.float64):
        super().__init__()
        self.source_dtype = source_dtype
        decoder = _copy_without_weight_norm(_decoder_of(model))
        for block in decoder.decode:
            if block.upsample_type != "none":
                block.upsample = NearestUpsample2x()
        self.decoder = decoder
        gen = decoder.generator
        sine = gen.m_source.l_sin_gen
        if sine.flag_for_pulse:
            raise NotImplementedError("SineGen(flag_for_pulse=True) is not used by Kokoro")
        self.scale = int(sine.upsample_scale)  # samples per F0 sample: 300
        self.sampling_rate = sine.sampling_rate
        self.sine_amp = sine.sine_amp
        self.noise_std = sine.noise_std
        self.voiced_threshold = sine.voiced_threshold
        self.register_buffer("harmonic_mult", torch.arange(1, sine.dim + 1, dtype=torch.float64).view(1, 1, -1))
        mask = torch.ones(1, sine.dim, dtype=torch.float64)
        mask[:, 0] = 0  # the fundamental gets no random initial phase
        self.register_buffer("phase_mask", mask)
        # float64 so that a float64 copy of the module is an exact reference.
        self.register_buffer("up_weights", torch.tensor(_upsample_linear_weights(self.scale), dtype=torch.float64))
        n_fft, hop = gen.post_n_fft, gen.stft.hop_length
        if stft == "conv":
            self.stft = ConvSTFT(n_fft, hop, gen.stft.win_length)
        elif stft == "torch":
            self.stft = TorchSTFT(n_fft, hop, gen.stft.win_length)
        else:
            raise ValueError(f"stft must be 'conv' or 'torch', not {stft!r}")

    # SineGen + SourceModuleHnNSF (harmonic branch) with explicit noise.
    def source(self, f0_up, phase_noise, sine_noise):
        """f0_up [B, T, 1] (T = 300·2F samples) → tanh(linear(sines)) [B, T, 1]."""
        dt = f0_up.dtype
        fn = torch.multiply(f0_up, self.harmonic_mult.to(dt))
        rad_values = (fn / self.sampling_rate) % 1
        rand_ini = phase_noise * self.phase_mask.to(dt)
        rad_values = torch.cat([rad_values[:, :1, :] + rand_ini.unsqueeze(1), rad_values[:, 1:, :]], dim=1)
        rad_values = downsample_linear(rad_values.transpose(1, 2), self.scale).transpose(1, 2)
        phase = torch.cumsum(rad_values, dim=1) * 2 * torch.pi
        phase = upsample_linear(phase.transpose(1, 2) * self.scale, self.scale, self.up_weights).transpose(1, 2)
        sine_waves = torch.sin(phase) * self.sine_amp
        uv = (f0_up > self.voiced_threshold).type(sine_waves.dtype)
        noise_amp = uv * self.noise_std + (1 - uv) * self.sine_amp / 3
        noise = noise_amp * sine_noise
        sine_waves = sine_waves * uv + noise
        linear = self.decoder.generator.m_source.l_linear
        return torch.tanh(F.linear(sine_waves, linear.weight.to(dt), linear.bias.to(dt)))

    def generator(self, x, s, f0_curve, phase_noise, sine_noise):
        gen = self.decoder.generator
        b = f0_curve.shape[0]
        dt = self.source_dtype or f0_curve.dtype
        if f0_curve.dtype == torch.float64:
            dt = torch.float64  # a float64 copy of the module stays float64 throughout
        f0_up = upsample_nearest(f0_curve.to(dt).unsqueeze(1), self.scale).transpose(1, 2)
        sine_noise = sine_noise.to(dt).reshape(b, sine_noise.shape[1], -1).transpose(1, 2)
        har_source = self.source(f0_up, phase_noise.to(dt), sine_noise)
        har_source = har_source.transpose(1, 2).squeeze(1)
        har_spec, har_phase = self.stft.transform(har_source)
        har = torch.cat([har_spec, har_phase], dim=1).to(x.dtype)
        for i in range(gen.num_upsamples):
            x = F.leaky_relu(x, negative_slope=0.1)
            x_source = gen.noise_convs[i](har)
            x_source = gen.noise_res[i](x_source, s)
            x = gen.ups[i](x)
            if i == gen.num_upsamples - 1:
                x = gen.reflection_pad(x)
            x = x + x_source
            xs = None
            for j in range(gen.num_kernels):
                y = gen.resblocks[i * gen.num_kernels + j](x, s)
                xs = y if xs is None else xs + y
            x = xs / gen.num_kernels
        x = F.leaky_relu(x)
        x = gen.conv_post(x)
        spec = torch.exp(x[:, : gen.post_n_fft // 2 + 1, :])
        phase = torch.sin(x[:, gen.post_n_fft // 2 + 1 :, :])
        return self.stft.inverse(spec, phase)

    def forward(self, asr, f0, n, s, phase_noise, sine_noise):
        dec = self.decoder
        b = asr.shape[0]
        f0_curve = f0.reshape(b, -1)
        n_curve = n.reshape(b, -1)
        F0 = dec.F0_conv(f0_curve.unsqueeze(1))
        N = dec.N_conv(n_curve.unsqueeze(1))
        x = torch.cat([asr, F0, N], dim=1)
        x = dec.encode(x, s)
        asr_res = dec.asr_res(asr)
        res = True
        for block in dec.decode:
            if res:
                x = torch.cat([x, asr_res, F0, N], dim=1)
            x = block(x, s)
            if block.upsample_type != "none":
                res = False
        return self.generator(x, s, f0_curve, phase_noise, sine_noise)


def _weight_normed(module: nn.Module):
    for m in module.modules():
        for hook in getattr(m, "_forward_pre_hooks", {}).values():
            if type(hook).__name__ == "WeightNorm":
                yield m, hook.name


def _copy_without_weight_norm(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` (left untouched) with weight norm folded into weights.

    ``torch.nn.utils.weight_norm`` keeps the computed weight as a non-leaf
    tensor, which ``deepcopy`` refuses; those are recomputed anyway, so we
    hand ``deepcopy`` detached stand-ins for them.
    """
    from torch.nn.utils import remove_weight_norm

    memo = {}
    for m, name in _weight_normed(module):
        w = getattr(m, name)
        memo[id(w)] = w.detach().clone()
    copied = copy.deepcopy(module, memo).eval()
    for m, name in list(_weight_normed(copied)):
        remove_weight_norm(m, name)
    for p in copied.parameters():
        p.requires_grad_(False)
    return copied


# --- inputs, export, build ----------------------------------------------------


def decoder_inputs(
    num_frames: int,
    seed: int = 0,
    *,
    batch: int = 1,
    noise_seed: int | None = 0,
    zero_noise: bool = False,
    decoder: nn.Module | None = None,
) -> dict[str, np.ndarray]:
    """Random but plausible decoder inputs (numpy float32), noise included.

    F0 is a voiced contour (≈100–250 Hz) with an unvoiced stretch, so both
    branches of the source are exercised.
    """
    rng = np.random.default_rng(seed)
    f = num_frames
    t = np.arange(2 * f) / max(2 * f - 1, 1)
    f0 = 150 + 80 * np.sin(2 * np.pi * (t * 1.5 + rng.random())) + rng.normal(0, 5, 2 * f)
    f0[int(0.6 * 2 * f) : int(0.75 * 2 * f)] = 0.0  # an unvoiced region
    f0 = np.broadcast_to(f0, (batch, 2 * f))
    inputs = {
        "asr": rng.standard_normal((batch, 512, f)).astype(np.float32),
        "f0": np.ascontiguousarray(f0.reshape(batch, f, 2), dtype=np.float32),
        "n": rng.standard_normal((batch, f, 2)).astype(np.float32),
        "s": rng.standard_normal((batch, 128)).astype(np.float32) * 0.5,
    }
    inputs.update(make_noise(f, noise_seed, decoder=decoder, batch=batch, zero_noise=zero_noise))
    return inputs


INPUT_NAMES = ("asr", "f0", "n", "s", "phase_noise", "sine_noise")


def export_decoder(
    model: nn.Module, *, example_frames: int = 8, max_frames: int = 4096
) -> torch.export.ExportedProgram:
    """``torch.export`` Kokoro's decoder with a symbolic frame count F.

    ``model`` is a ``kokoro.KModel``, a ``kokoro.istftnet.Decoder`` or an
    ``ExportableDecoder``. The program's inputs are ``INPUT_NAMES``.
    """
    wrapper = model if isinstance(model, ExportableDecoder) else ExportableDecoder(model)
    wrapper = wrapper.eval()
    frames = torch.export.Dim("F", min=2, max=max_frames)
    ex = decoder_inputs(example_frames, decoder=wrapper.decoder)
    args = tuple(torch.from_numpy(ex[k]) for k in INPUT_NAMES)
    dynamic_shapes = ({2: frames}, {1: frames}, {1: frames}, None, None, {2: frames})
    with torch.no_grad():
        return torch.export.export(wrapper, args, dynamic_shapes=dynamic_shapes)


def import_decoder(exported: torch.export.ExportedProgram):
    """The exported decoder as a Relax IRModule, through our converters."""
    from kokoro_tvm_ext.plugin.frontend import from_exported_program

    return from_exported_program(exported, unwrap_unit_return_tuple=True)


def build_decoder_vm(model_or_program, *, target=None, device=None):
    """Export (if needed), import and compile the decoder; returns ``(vm, executable)``.

    Call it as ``vm["main"](asr, f0, n, s, phase_noise, sine_noise)`` with
    ``tvm.runtime.tensor`` inputs. One build serves every F.
    """
    import tvm
    from tvm import relax

    ep = model_or_program
    if not isinstance(ep, torch.export.ExportedProgram):
        ep = export_decoder(ep)
    mod = import_decoder(ep)
    target = tvm.target.Target(target or {"kind": "llvm"})
    exe = tvm.compile(mod, target=target)
    vm = relax.VirtualMachine(exe, device or tvm.cpu())
    return vm, exe


def run_decoder_vm(vm, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Run a built decoder on numpy inputs (``INPUT_NAMES`` keys); audio [B, 1, 600·F]."""
    import tvm

    args = [tvm.runtime.tensor(np.ascontiguousarray(inputs[k], dtype=np.float32)) for k in INPUT_NAMES]
    return vm["main"](*args).numpy()


def run_decoder_torch(
    wrapper: ExportableDecoder, inputs: dict[str, np.ndarray], dtype: torch.dtype = torch.float32
) -> np.ndarray:
    """Run the wrapper eagerly on numpy inputs, in ``dtype`` (float64: a reference).

    The wrapper is copied and converted unless it already has that dtype.
    """
    if next(wrapper.parameters()).dtype != dtype:
        wrapper = copy.deepcopy(wrapper).to(dtype)
    w = wrapper
    args = [torch.from_numpy(np.asarray(inputs[k])).to(dtype) for k in INPUT_NAMES]
    with torch.no_grad():
        return w(*args).to(torch.float64).numpy()


def run_kokoro_decoder(
    model: nn.Module, inputs: dict[str, np.ndarray], seed: int, dtype: torch.dtype = torch.float32
) -> np.ndarray:
    """hexgrad's own decoder, drawing its own noise after ``torch.manual_seed(seed)``.

    Its noise equals ``torch_noise(F, seed, dtype=dtype)``, so this is the
    PyTorch baseline for inputs built with that noise. The global RNG state is
    restored afterwards.
    """
    decoder = _decoder_of(model)
    b = inputs["asr"].shape[0]
    args = [
        torch.from_numpy(np.asarray(inputs["asr"])),
        torch.from_numpy(np.asarray(inputs["f0"])).reshape(b, -1),
        torch.from_numpy(np.asarray(inputs["n"])).reshape(b, -1),
        torch.from_numpy(np.asarray(inputs["s"])),
    ]
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        return decoder(*[a.to(dtype) for a in args]).to(torch.float64).numpy()


__all__ = [
    "DECODER_CONFIG",
    "ExportableDecoder",
    "INPUT_NAMES",
    "build_decoder",
    "build_decoder_vm",
    "decoder_inputs",
    "export_decoder",
    "import_decoder",
    "make_noise",
    "run_decoder_torch",
    "run_decoder_vm",
    "run_kokoro_decoder",
    "samples_per_frame",
    "torch_noise",
]
