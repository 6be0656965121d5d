"""SineGen's noise, drawn on the host with numpy (no torch at run time)."""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.model.spec import HARMONICS, SAMPLES_PER_FRAME


def make_noise(
    num_frames: int,
    seed: int | None = 0,
    *,
    harmonics: int = HARMONICS,
    samples_per_frame: int = SAMPLES_PER_FRAME,
    batch: int = 1,
    zero_noise: bool = False,
    dtype=np.float32,
) -> dict[str, np.ndarray]:
    """The decoder's noise inputs for ``num_frames`` frames.

    ``{"phase_noise": [B, H], "sine_noise": [B, H, F, S]}``: uniform [0, 1)
    initial phases and standard normal noise, the distributions ``torch.rand``
    and ``torch.randn_like`` draw in SineGen, from
    ``numpy.random.default_rng(seed)``. Same seed and F, same noise.
    ``zero_noise=True`` gives zeros: a deterministic decoder.
    """
    shape = (batch, harmonics, num_frames, samples_per_frame)
    if zero_noise:
        return {"phase_noise": np.zeros((batch, harmonics), dtype), "sine_noise": np.zeros(shape, dtype)}
    rng = np.random.default_rng(seed)
    phase = rng.random((batch, harmonics)).astype(dtype)
    noise = rng.standard_normal(shape).astype(dtype)
    return {"phase_noise": phase, "sine_noise": noise}
