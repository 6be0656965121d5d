"""Session-wide fixtures. Build helpers live in tvm_build.py (tests/ is on sys.path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm  # noqa: F401  (the full TVM, compiler included: else the first test to load an artifact picks TVM's runtime alone for the whole worker)

import kokoro_tvm_ext  # noqa: F401  (registers the plugin before any VM is created)

TIERS = ("unit", "model", "integration")
# Front ends over real processes and sockets.
INTEGRATION = ("serve", "book", "aarch64", "test_cli.py", "test_wheel.py")
# Fixtures that mean a compiled Kokoro (or its PyTorch reference) is in the test.
MODEL_FIXTURES = {"small_artifact", "kokoro_model", "real_artifact", "bf16_artifact", "arm_library"}
# Fixtures and files that need a system tool (tests/system_tools.py): marked ``system_tools``, which
# test_missing_tools.py runs with the tools hidden, checking that they skip.
SYSTEM_TOOL_FIXTURES = {"arm_library", "arm_wheel", "arm_wheels", "arm64"}
SYSTEM_TOOL_FILES = ("aarch64", "serve/test_web.py", "book/test_ray_in_loopback.py")
# The files that take longest, longest first (seconds of a fresh-clone CI run on 2 cores, 2026-11-26).
# The test command hands files to its two workers in this order, then the rest in collection order
# (scripts/test.sh passes --no-loadscope-reorder; xdist's default, most tests first, started the
# longest file near the end, leaving one core idle while it ran).
LONGEST_FIRST = (
    "aarch64/test_arm64_install.py",  # ~460 (+160 building the arm64 root): pip and Kokoro under emulation
    "test_cli.py",  # ~300: the first say binds the real weights, nine languages against PyTorch and Whisper
    "test_wheel.py",  # ~215: the zig wheel and sdist builds, installs with uv
    "book/test_ray_in_loopback.py",  # ~180: two Ray nodes started and killed (sharing the cores)
    "kokoro/test_int8_mode.py",  # ~140 (its compile ~110; ~245 under a load of 8): the int8 artifact's compile
    "kokoro/test_bf16_mode.py",  # ~80 (~140 with AVX512-BF16): the bf16 artifact's compile
    "serve/test_concurrency.py",  # ~110
    "kokoro/test_stage_decoder.py",  # ~105: the decoder's export and compile
    "kokoro/test_pipeline.py",  # ~80
    "voice_design/test_design.py",  # design runs on the real int8 (or fp32) artifact
    "speaker_encoder/test_speaker_encoder.py",  # the encoder's compile and PyTorch's Resemblyzer
    "book/test_book.py",  # ~85
    "runtime/test_soak.py",  # ~65
    "runtime/test_thread_safety.py",  # ~60
)


@pytest.fixture(autouse=True)
def _voice_dirs_of_this_test_only(monkeypatch):
    """A voices directory a test adds (``serve --voices-dir`` in process) is gone with the test: its tmp_path is
    deleted when it passes, and every later voice lookup in the worker would fail on it."""
    from kokoro_tvm_ext.speech.voices import packs

    monkeypatch.setattr(packs, "_added_dirs", [])


def pytest_configure(config):
    config.addinivalue_line("markers", "system_tools: needs what scripts/install-system-deps.sh installs")


def pytest_collection_modifyitems(config, items):
    """Give every test one tier (pyproject.toml's markers), unless it names its own; longest files first; mark
    those that need a system tool."""
    tests = Path(__file__).parent
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_under(tests, item).as_posix(), len(rank)))
    for item in items:
        path = _under(tests, item).as_posix()
        if SYSTEM_TOOL_FIXTURES & set(item.fixturenames) or path.startswith(SYSTEM_TOOL_FILES):
            item.add_marker("system_tools")
        if any(item.get_closest_marker(t) for t in TIERS):
            continue
        parts = _under(tests, item).parts
        if parts[0] in INTEGRATION:
            tier = "integration"
        elif MODEL_FIXTURES & set(item.fixturenames) or parts[0] in ("kokoro", "runtime"):
            tier = "model"
        else:
            tier = "unit"
        item.add_marker(tier)


def _under(tests: Path, item) -> Path:
    """The item's file relative to tests/; the bench's and the harness's own tests (bench/tests, harness/tests)
    keep their absolute path: no rank, and the unit tier unless they name one."""
    path = Path(item.fspath)
    return path.relative_to(tests) if path.is_relative_to(tests) else path


def pytest_report_header(config):
    from kokoro_harness.local_ray import WRAPPER, in_loopback_namespace

    if not in_loopback_namespace():
        return f"Ray cluster tests: in test_ray_in_loopback.py (alone: {WRAPPER} python -m pytest tests/book)"


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def kokoro_model():
    """hexgrad's KModel at the real Kokoro-82M config with random weights (seed 0)."""
    pytest.importorskip("kokoro")
    from kokoro_tvm_ext.model.config import load_config
    from kokoro_tvm_ext.model.weights.kmodel import build_kmodel

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


@pytest.fixture(scope="session")
def arm_library(request):
    """``kokoro_model`` cross-compiled for cortex-a76, fp32 (precision_modes.cross_compiled); skipped without the
    cross compiler before the model is built."""
    from precision_modes import cross_compiled
    from system_tools import CROSS_COMPILER, require

    require(*CROSS_COMPILER)
    return cross_compiled(request.getfixturevalue("kokoro_model"))
