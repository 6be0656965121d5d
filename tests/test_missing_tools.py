"""The README's test command on a machine without the system packages (scripts/install-system-deps.sh, which
scripts/test.sh runs only as root): with the aarch64 cross compiler, qemu, Chromium, debootstrap and iproute2's ip
hidden from PATH, every test that needs one (marked ``system_tools`` by tests/conftest.py) skips, each in one line
naming the install command, and none fails. A pytest run of those tests in a child process, ~20 s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from system_tools import INSTALL

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = re.compile(r"aarch64-linux-gnu-.*|qemu-.*|chromium.*|debootstrap|ip")
# Every file holding a system_tools test; tests/serve last: its files import their conftest by the name
# `conftest`, which is the one loaded last.
FILES = (
    "tests/aarch64",
    "tests/kokoro/test_cross_compile.py",
    "tests/test_cpu_features.py",
    "tests/test_wheel.py",
    "tests/book/test_ray_in_loopback.py",
    "tests/serve/test_web.py",
)


def path_without_tools(farm: Path) -> str:
    """PATH with every directory that holds a hidden tool replaced by one of symlinks to the rest of its
    programs (they share /usr/bin with everything else)."""
    dirs = []
    for i, entry in enumerate(os.environ["PATH"].split(os.pathsep)):
        d = Path(entry)
        if not d.is_dir() or not any(HIDDEN.fullmatch(p.name) for p in d.iterdir()):
            dirs.append(entry)
            continue
        copy = farm / str(i)
        copy.mkdir(parents=True)
        for program in d.iterdir():
            if not HIDDEN.fullmatch(program.name) and os.access(program, os.X_OK) and not program.is_dir():
                (copy / program.name).symlink_to(program)
        dirs.append(str(copy))
    return os.pathsep.join(dirs)


def test_without_the_system_tools_their_tests_skip_naming_the_install_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not the outer run's worker
    env["PATH"] = path_without_tools(tmp_path / "path")
    hidden = subprocess.run(
        ["bash", "-c", "command -v aarch64-linux-gnu-gcc qemu-aarch64 qemu-x86_64 chromium debootstrap ip"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert hidden.stdout == "", f"still on PATH: {hidden.stdout}"

    report = tmp_path / "report.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsfE", f"--junitxml={report}"]
        + ["-m", "system_tools", *FILES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\d+ skipped", summary) and not re.search(r"passed|failed|error", summary), out[-6000:]
    # Every test and every file skipped at its import is one case of the report; the reasons are in -rs's lines.
    cases = list(ElementTree.parse(report).iter("testcase"))
    assert all([c.tag for c in case] == ["skipped"] for case in cases), out[-6000:]
    ran = {case.get("classname") or case.get("name") for case in cases}  # tests.x.test_y
    for name in FILES:
        assert any(module.startswith(name.removesuffix(".py").replace("/", ".")) for module in ran), (name, ran)
    reasons = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    counted = sum(int(re.match(r"SKIPPED \[(\d+)\]", line)[1]) for line in reasons)  # like skips add up
    assert counted == len(cases) and all(INSTALL in line for line in reasons), "\n".join(reasons)
