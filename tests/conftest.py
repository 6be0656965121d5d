"""Session-wide fixtures. Build helpers live in tvm_build.py (tests/ is on sys.path)."""

from __future__ import annotations

import numpy as np
import pytest

import kokoro_tvm_ext  # noqa: F401  (registers the plugin before any VM is created)


def pytest_report_header(config):
    from kokoro_tvm_ext.benchmark.local_ray import WRAPPER, in_loopback_namespace

    if not in_loopback_namespace():
        return f"tests/book/test_ray_cluster.py is not collected here; run: {WRAPPER} python -m pytest tests/book"


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def kokoro_model():
    """hexgrad's KModel at the real Kokoro-82M config with random weights (seed 0)."""
    pytest.importorskip("kokoro")
    from kokoro_tvm_ext.assets.config import load_config
    from kokoro_tvm_ext.kokoro.model import build_kmodel

    return build_kmodel(load_config(), seed=0)


@pytest.fixture(scope="session")
def small_artifact(kokoro_model):
    """``kokoro_model`` compiled (fp32, plugin LSTM): shared by every test that needs a real
    artifact but not real weights. Kept in the user cache under ``test-artifacts/``, keyed by
    the compiler sources like any cached artifact, so later runs on the machine reuse it.
    Random weights predict ~25 frames per token at speed 1; tests pass a high speed to keep
    the audio short."""
    from kokoro_tvm_ext.artifact_cache import artifact_key, ensure_compiled
    from kokoro_tvm_ext.assets.cache import cache_dir

    out = cache_dir() / "test-artifacts" / artifact_key("random-weights-seed0")
    return ensure_compiled(out, lambda: kokoro_model, quiet=True)
