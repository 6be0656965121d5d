"""Helpers for the asset-layer tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

ENV_VARS = ("KOKORO_TVM_CACHE", "KOKORO_TVM_WEIGHTS", "KOKORO_TVM_VOICES_SDIST", "HF_HUB_CACHE", "HF_HOME")


def isolate(mp: pytest.MonkeyPatch, root: Path) -> Path:
    """Point every lookup the asset layer makes at empty directories under ``root``."""
    for var in ENV_VARS:
        mp.delenv(var, raising=False)
    (root / "cache").mkdir(parents=True, exist_ok=True)
    (root / "hf").mkdir(parents=True, exist_ok=True)
    mp.setenv("KOKORO_TVM_CACHE", str(root / "cache"))
    mp.setenv("HF_HUB_CACHE", str(root / "hf"))
    return root


def make_fake_hf_cache(
    hub: Path,
    *,
    weights: bytes | None = b"not really weights",
    voices: dict | None = None,
    commit: str = "0123456789abcdef0123456789abcdef01234567",
) -> Path:
    """A minimal on-disk HuggingFace cache entry for hexgrad/Kokoro-82M (plain files, no
    symlinks, which scan_cache_dir accepts). ``voices`` maps a name to a [510, 1, 256] array."""
    from kokoro_tvm_ext.model.config import bundled_config_path

    repo = hub / "models--hexgrad--Kokoro-82M"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    shutil.copy(bundled_config_path(), snap / "config.json")
    if weights is not None:
        (snap / "kokoro-v1_0.pth").write_bytes(weights)
    if voices:
        import torch

        (snap / "voices").mkdir()
        for name, arr in voices.items():
            torch.save(torch.from_numpy(np.asarray(arr, np.float32)), snap / "voices" / f"{name}.pt")
    return snap
