"""The benchmark's peak-RSS column: each worker must report its own peak, not its parent's.

The driver spawns workers with ``subprocess`` while it holds models and audio;
``ru_maxrss`` would start every worker at the driver's peak (it survives exec).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)

BENCH = Path(__file__).resolve().parents[1]  # bench/, where kokoro_bench is imported from (not installed)

MIB = 1 << 20
PARENT_MIB = 2048
CHILD_MIB = 300

# Touch every page, so the bytes are resident.
TOUCH = "buf = bytearray({n} * {mib})\nfor i in range(0, len(buf), 4096):\n    buf[i] = 1\n"
CHILD = (
    "import sys\n"
    "from kokoro_bench.workers import peak_rss_mb\n"
    "before = peak_rss_mb()\n" + TOUCH.format(n=CHILD_MIB, mib=MIB) + "print(before, peak_rss_mb())\n"
)
PARENT = (
    "import subprocess, sys\n"
    + TOUCH.format(n=PARENT_MIB, mib=MIB)
    + "out = subprocess.run([sys.executable, '-c', sys.argv[1]], capture_output=True, text=True, check=True)\n"
    "print(out.stdout)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the inherited ru_maxrss is Linux's")
def test_a_worker_reports_its_own_peak_not_its_parents():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", PARENT, CHILD], capture_output=True, text=True, check=True, env=env)
    before, after = map(float, out.stdout.split())
    # The child's imports (TVM maps ~0.7 GiB) stay well below the parent's 2 GiB...
    assert before < PARENT_MIB - 512, before
    # ...and its own 300 MiB show up on top of them.
    assert CHILD_MIB - 5 <= after - before <= CHILD_MIB + 50, (before, after)
