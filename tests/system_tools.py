"""The system tools some tests need (imported as `system_tools`): scripts/install-system-deps.sh installs them all,
and scripts/test.sh runs it as root. A test whose tool is missing skips in one line naming that script; the tests
that can need one carry the ``system_tools`` marker (tests/conftest.py), which test_missing_tools.py runs with the
tools hidden."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL = "sudo bash scripts/install-system-deps.sh"
# What a file, not a command, shows: the cross linker's C library (gcc-aarch64-linux-gnu only recommends it).
CROSS_LIBC = Path("/usr/aarch64-linux-gnu/lib/crti.o")
ARM64_LIBC = Path("/lib/ld-linux-aarch64.so.1")


def missing(*tools: str) -> list[str]:
    """The ``tools`` (commands on PATH, or absolute paths) that are not here."""
    return [t for t in tools if (not Path(t).exists() if t.startswith("/") else shutil.which(t) is None)]


def skip_reason(*tools: str) -> str | None:
    """One line naming the missing ``tools`` and the install command; None if all are here."""
    gone = missing(*tools)
    return f"needs {', '.join(gone)}: {INSTALL}" if gone else None


def require(*tools: str) -> None:
    """Skip the calling test (or module, at import) unless every one of ``tools`` is here."""
    reason = skip_reason(*tools)
    if reason:
        pytest.skip(reason, allow_module_level=True)


CROSS_COMPILER = ("aarch64-linux-gnu-gcc", str(CROSS_LIBC))


def require_aarch64_toolchain() -> None:
    """Skip unless scripts/build-wheels.sh finds the toolchain that builds the aarch64 wheel (its own check)."""
    root = Path(__file__).resolve().parents[1]
    asked = subprocess.run(
        ["bash", "-c", "source scripts/aarch64-env.sh && aarch64_toolchain_missing"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    if asked.stdout.strip():
        pytest.skip(f"needs the aarch64 toolchain ({asked.stdout.strip()}): {INSTALL}", allow_module_level=True)
