"""Building a ``kokoro.KModel`` without HuggingFace: from a config plus weights, or random."""

from __future__ import annotations

import os
import tempfile


def build_kmodel(config: dict, weights_path: str | None = None, seed: int = 0):
    """A ``kokoro.KModel`` in eval mode from ``config`` (a dict).

    With ``weights_path`` None the weights are random (seeded), which is what
    the fidelity tests use: KModel loads "an empty checkpoint" and keeps its
    initialisation. No network is touched either way.
    """
    import torch
    from kokoro import KModel

    torch.manual_seed(seed)
    if weights_path is not None:
        return KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=str(weights_path)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        empty = os.path.join(tmp, "empty.pth")
        torch.save({}, empty)
        return KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=empty).eval()
