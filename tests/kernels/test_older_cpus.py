"""The Rust kernels' cargo tests on emulated older x86-64 CPUs (scripts/test-portability.sh: Haswell with
AVX2 and no AVX-512, Nehalem with no AVX), where the kernels must pick their fallbacks and agree with the
tests' naive references. Needs Debian's qemu-user (.ci/run installs it) and the release test binary that
scripts/test.sh's `cargo test` step built.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration  # minutes of emulation: not in the fast unit tier


def test_the_kernel_tests_pass_on_emulated_haswell_and_nehalem():
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-user is not installed (apt-get install qemu-user)")
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    result = subprocess.run(
        ["bash", ROOT / "scripts" / "test-portability.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1200
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    # One summary line per emulated CPU, each with its tests all passed.
    summaries = re.findall(r"^test result: ok\. [1-9]\d* passed; 0 failed", result.stdout, re.M)
    assert len(summaries) == 2, result.stdout[-3000:]
