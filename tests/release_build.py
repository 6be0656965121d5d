"""scripts/build-wheels.sh's wheels and sdist for the tests (imported as `release_build`): built once per test run
into target/test-dist, however many test files ask, and every maturin build of the tests one at a time. maturin
stages the extension in the cargo target dir (target/maturin/), so two builds at once there can swap their
extensions (an aarch64 wheel came out holding the x86-64 one); and the build is minutes of two cores."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "target" / "test-dist"


@contextmanager
def one_build_at_a_time() -> Iterator[None]:
    """Hold the lock every maturin build of the tests in this repo's target dir takes (across processes)."""
    DIST.parent.mkdir(parents=True, exist_ok=True)
    with open(DIST.parent / "test-dist.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process ends
        yield


def release_dist() -> Path:
    """The directory of this tree's release wheels (x86-64, and aarch64 where its toolchain is) and sdist, without
    the companion wheel's levels. Reused within one pytest-xdist run (its workers share a run id); rebuilt
    otherwise."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    stamp = DIST / ".built-for-run"
    with one_build_at_a_time():
        if run and stamp.is_file() and stamp.read_text() == run:
            return DIST
        shutil.rmtree(DIST, ignore_errors=True)
        env = {**os.environ, "PYTHON": sys.executable, "KOKORO_TVM_PREBUILT_LEVELS": ""}
        built = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-wheels.sh"), str(DIST)], capture_output=True, text=True, env=env
        )
        if built.returncode != 0:
            raise AssertionError(f"scripts/build-wheels.sh failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}")
        stamp.write_text(run)
    return DIST
