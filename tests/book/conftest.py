"""Fixtures for the book tests: the session's small random-weights artifact (tests/conftest.py),
a voice pack file and a short two-chapter book. Random weights speak ~25 frames per token at
speed 1, so the tests speak at speed 10 (book_inputs.SPEED) to keep the audio, and the time, short."""

from __future__ import annotations

import numpy as np
import pytest
from book_inputs import BOOK_MD
from kokoro_harness.local_ray import in_loopback_namespace

RAY_TESTS = "test_ray_cluster.py"
# The Ray cluster tests run only where loopback is the one network interface (see
# harness/kokoro_harness/local_ray.py); test_ray_in_loopback.py runs them so, as one test of the main run.
collect_ignore = [] if in_loopback_namespace() else [RAY_TESTS]


@pytest.fixture(scope="session")
def artifact(small_artifact):
    return small_artifact


@pytest.fixture(scope="session")
def voice_file(tmp_path_factory):
    """A voice pack [510, 1, 256] as a .npy file: no installed voices needed."""
    path = tmp_path_factory.mktemp("voice") / "test_voice.npy"
    np.save(path, (np.random.default_rng(0).standard_normal((510, 1, 256)) * 0.1).astype(np.float32))
    return path


@pytest.fixture
def book_md(tmp_path):
    path = tmp_path / "book.md"
    path.write_text(BOOK_MD)
    return path
