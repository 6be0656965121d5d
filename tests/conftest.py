"""Session-wide fixtures. Build helpers live in tvm_build.py (tests/ is on sys.path)."""
from __future__ import annotations

import numpy as np
import pytest

import kokoro_tvm_ext  # noqa: F401  (registers the plugin before any VM is created)


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
