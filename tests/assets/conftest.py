"""Fixtures for the asset layer: an isolated environment (no user cache, no HuggingFace
cache, no weights env var) and the bundled config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from assets_helpers import isolate


@pytest.fixture
def isolated(tmp_path, monkeypatch) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.fixture(scope="session")
def bundled_config() -> dict:
    from kokoro_tvm_ext.model.config import bundled_config_path

    return json.loads(bundled_config_path().read_text(encoding="utf-8"))
