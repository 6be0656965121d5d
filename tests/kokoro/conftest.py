"""The random-weight Kokoro model shared by the whole-model tests of this folder."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kokoro_model():
    pytest.importorskip("kokoro")
    from kokoro_tvm_ext.assets.config import load_config
    from kokoro_tvm_ext.kokoro.model import build_kmodel

    return build_kmodel(load_config(), seed=0)
