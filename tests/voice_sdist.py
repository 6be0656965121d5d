"""The kokoro 0.9.4 sdist for tests: ``$KOKORO_TVM_VOICES_SDIST`` if set, else fetched once
per session with pip (as `kokoro-tvm voices --install` does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def fetch_sdist(tmp_path_factory) -> Path:
    from kokoro_tvm_ext.speech.voices import sdist as sdist_voices

    given = os.environ.get(sdist_voices.SDIST_ENV)
    if given and Path(given).is_file():
        return Path(given)
    dest = tmp_path_factory.mktemp("sdist")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            str(dest),
            sdist_voices.SDIST_REQUIREMENT,
        ],
        capture_output=True,
        text=True,
    )
    path = dest / sdist_voices.SDIST_FILE
    if result.returncode != 0 or not path.is_file():
        pytest.skip(f"cannot fetch {sdist_voices.SDIST_FILE} (no PyPI access?): {result.stderr[-300:]}")
    return path
