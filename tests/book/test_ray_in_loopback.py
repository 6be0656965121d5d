"""Runs tests/book/test_ray_cluster.py where it can run: in a network namespace with loopback alone
(scripts/in-loopback-netns.sh; a local Ray cluster advertises the host's own address otherwise).

As one test of the main run, so the test command's workers share its ~2 minutes of Ray start-up with
the other files instead of waiting for it after them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kokoro_harness.local_ray import WRAPPER, in_loopback_namespace
from system_tools import require

require("ip", "unshare")  # the namespace's loopback is brought up with iproute2's ip

ROOT = Path(__file__).resolve().parents[2]


def test_the_ray_cluster_tests_pass_on_loopback_alone(small_artifact):
    if in_loopback_namespace():
        pytest.skip("this process is in such a namespace already: test_ray_cluster.py is collected directly")
    pytest.importorskip("ray")
    # small_artifact: compiled (or found) here first, so the inner run loads it from the shared cache.
    # No warnings summary: Ray's own deprecation warnings filled the tail this test shows, hiding the failure.
    result = subprocess.run(
        ["bash", ROOT / WRAPPER, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-ra"]
        + ["-p", "no:warnings", "--tb=short", "tests/book/test_ray_cluster.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(result.stdout[-4000:])
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
    assert " passed" in result.stdout.splitlines()[-1], result.stdout[-2000:]
