"""Session-wide fixtures. Build helpers live in tvm_build.py (tests/ is on sys.path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm  # noqa: F401  (the full TVM, compiler included: else the first test to load an artifact picks TVM's runtime alone for the whole worker)

import kokoro_tvm_ext  # noqa: F401  (registers the plugin before any VM is created)


def _share_the_cores_between_workers() -> None:
    """Under pytest-xdist, every worker computes on its share of the cores: with a pool of one
    thread per core in each worker, every parallel loop waits on threads the other worker's pool
    has descheduled (two processes synthesizing the same chunks: 184 s on two threads each, 141 s
    on one). Subprocesses inherit it; tests that compare thread counts set their own."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "TVM_NUM_THREADS" not in os.environ:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["TVM_NUM_THREADS"] = str(threads)  # TVM's pool and the kernels' pool read it
        if "torch" in sys.modules:  # tvm_ffi imports it when installed
            sys.modules["torch"].set_num_threads(threads)


_share_the_cores_between_workers()

TIERS = ("unit", "model", "integration")
# Front ends over real processes and sockets.
INTEGRATION = ("serve", "book", "test_cli.py", "test_wheel.py")
# Fixtures that mean a compiled Kokoro (or its PyTorch reference) is in the test.
MODEL_FIXTURES = {"small_artifact", "kokoro_model", "real_artifact", "bf16_artifact"}
# The files that take longest (measured with --durations on 2 cores), longest first. The
# test command hands files to its two workers in this order, then the rest in collection
# order (scripts/test.sh passes --no-loadscope-reorder): a long file started last would
# leave one core idle while it runs.
LONGEST_FIRST = (
    "test_cli.py",
    "test_wheel.py",
    "kokoro/test_bf16_mode.py",
    "kokoro/test_pipeline.py",
    "kokoro/test_stage_decoder.py",
    "runtime/test_soak.py",
    "runtime/test_thread_safety.py",
    "runtime/test_tokens.py",
)


def pytest_collection_modifyitems(config, items):
    """Give every test one tier (pyproject.toml's markers), unless it names its own; longest files first."""
    tests = Path(__file__).parent
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.fspath).relative_to(tests).as_posix(), len(rank)))
    for item in items:
        if any(item.get_closest_marker(t) for t in TIERS):
            continue
        parts = Path(item.fspath).relative_to(tests).parts
        if parts[0] in INTEGRATION:
            tier = "integration"
        elif MODEL_FIXTURES & set(item.fixturenames) or parts[0] in ("kokoro", "runtime"):
            tier = "model"
        else:
            tier = "unit"
        item.add_marker(tier)


def pytest_report_header(config):
    from kokoro_bench.local_ray import WRAPPER, in_loopback_namespace

    if not in_loopback_namespace():
        return f"tests/book/test_ray_cluster.py is not collected here; run: {WRAPPER} python -m pytest tests/book"


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def kokoro_model():
    """hexgrad's KModel at the real Kokoro-82M config with random weights (seed 0)."""
    pytest.importorskip("kokoro")
    from kokoro_tvm_ext.model.adapters.model import build_kmodel
    from kokoro_tvm_ext.model.config import load_config

    return build_kmodel(load_config(), seed=0)


@pytest.fixture(scope="session")
def small_artifact(kokoro_model):
    """``kokoro_model`` compiled (fp32, plugin LSTM): shared by every test that needs a real
    artifact but not real weights. Kept in the user cache under ``test-artifacts/``, keyed by
    the compiler sources like any cached artifact, so later runs on the machine reuse it.
    Random weights predict ~25 frames per token at speed 1; tests pass a high speed to keep
    the audio short."""
    from kokoro_tvm_ext.model.artifact_cache import artifact_key, ensure_compiled
    from kokoro_tvm_ext.support.cache import cache_dir

    out = cache_dir() / "test-artifacts" / artifact_key("random-weights-seed0")
    return ensure_compiled(out, lambda: kokoro_model, quiet=True)
