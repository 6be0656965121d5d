"""A HiFi-GAN V1-style generator in plain PyTorch, for testing and timing stock TVM on a conv1d vocoder.

Mel [B, n_mels, T] -> audio [B, 1, T * prod(upsample_rates)]:

    conv_pre (k7) -> for each upsampling stage: leaky_relu(0.1) -> ConvTranspose1d
    -> multi-receptive-field fusion (the mean of one ResBlock1 per resblock kernel size)
    -> leaky_relu (slope 0.01, as HiFi-GAN) -> conv_post (k7) -> tanh

ResBlock1: for each dilation d, x = x + conv_k,1(lrelu(conv_k,d(lrelu(x)))).

Plain convolution weights by default: the inference form, as HiFi-GAN checkpoints are run
after ``remove_weight_norm``. ``make_generator(..., weight_norm=True)`` keeps HiFi-GAN's
training form (``torch.nn.utils.parametrizations.weight_norm`` on every convolution, the same
function); it exports cleanly too, as ``aten._weight_norm`` recomputed on every call, which
stock TVM imports and runs (checked by hand on the small config, with and without our
kernels: 1e-6 of torch; not in the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

LRELU_SLOPE = 0.1


@dataclass(frozen=True)
class HiFiGANConfig:
    n_mels: int = 80
    upsample_initial_channel: int = 512
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 4, 4)
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsample_rates)


V1 = HiFiGANConfig()
# The HiFi-GAN paper's V2: V1's layers at a quarter of its width (~1/16 of its work).
V2 = HiFiGANConfig(upsample_initial_channel=128)
# For tests: V1's layers (same kernels, dilations, hop 256) at 1/8 of its width.
SMALL = HiFiGANConfig(upsample_initial_channel=64)
CONFIGS = {"v1": V1, "v2": V2, "small": SMALL}


def _same_padding(kernel: int, dilation: int = 1) -> int:
    return (kernel - 1) * dilation // 2


class ResBlock1(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.dilated = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same_padding(kernel, d)) for d in dilations
        )
        self.plain = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, padding=_same_padding(kernel)) for _ in dilations
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for dilated, plain in zip(self.dilated, self.plain):
            y = dilated(F.leaky_relu(x, LRELU_SLOPE))
            x = x + plain(F.leaky_relu(y, LRELU_SLOPE))
        return x


class Generator(nn.Module):
    def __init__(self, config: HiFiGANConfig):
        super().__init__()
        self.config = config
        channels = config.upsample_initial_channel
        self.conv_pre = nn.Conv1d(config.n_mels, channels, 7, padding=3)
        self.ups = nn.ModuleList()
        self.mrf = nn.ModuleList()
        for rate, kernel in zip(config.upsample_rates, config.upsample_kernel_sizes):
            self.ups.append(nn.ConvTranspose1d(channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2))
            channels //= 2
            self.mrf.append(
                nn.ModuleList(
                    ResBlock1(channels, k, d)
                    for k, d in zip(config.resblock_kernel_sizes, config.resblock_dilation_sizes)
                )
            )
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = self.conv_pre(mel)
        for up, blocks in zip(self.ups, self.mrf):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            total = blocks[0](x)
            for block in blocks[1:]:
                total = total + block(x)
            x = total / len(blocks)
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


def make_generator(config: HiFiGANConfig = V1, seed: int = 0, weight_norm: bool = False) -> Generator:
    """A Generator in eval mode with random weights that depend only on ``seed``.

    Weights are Gaussian, scaled per layer so the activations stay near 0.7 rms from
    conv_pre to the last upsampling stage and tanh's input near 0.3 rms (on
    ``random_mel``): PyTorch's default init would make the residual stacks shrink or
    grow until tanh saturates or the audio is ~0, either of which hides errors.
    Conv1d: variance 0.5 / (in_channels * kernel). ConvTranspose1d: each output sums
    in_channels * kernel / stride taps, variance 2 / that (after leaky_relu halves
    the signal's power). Biases: N(0, 0.01^2). ``weight_norm``: then every convolution gets
    weight_norm's parametrization (g = |v|, so the function does not change).
    """
    generator = torch.Generator().manual_seed(seed)
    model = Generator(config)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv1d):
                w = module.weight
                fan_in = w.shape[1] * w.shape[2]
                w.copy_(torch.randn(w.shape, generator=generator) * math.sqrt(0.5 / fan_in))
            elif isinstance(module, nn.ConvTranspose1d):
                w = module.weight  # [in, out, kernel]
                fan_in = w.shape[0] * w.shape[2] / module.stride[0]
                w.copy_(torch.randn(w.shape, generator=generator) * math.sqrt(2.0 / fan_in))
            else:
                continue
            module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.01)
    if weight_norm:
        for module in list(model.modules()):
            if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
                torch.nn.utils.parametrizations.weight_norm(module)
    return model.eval()


def random_mel(frames: int, n_mels: int = 80, seed: int = 0, batch: int = 1) -> torch.Tensor:
    """A standardised log-mel stand-in: N(0, 1) noise, deterministic in ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n_mels, frames, generator=generator)
