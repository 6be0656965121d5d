"""The sha256 of what requirements/dev.lock is compiled from: pyproject.toml's requires-python, dependencies,
optional-dependencies and build-system requires, and requirements/build.in. scripts/lock.sh writes it into the
lock's first line; tests/test_lock.py recomputes it, so an edit to any of them without a refresh fails there."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import tomllib  # Python >= 3.11, as the lock: torch 2.15 has no 3.10 wheels

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev.lock"
BUILD_IN = ROOT / "requirements" / "build.in"
PREFIX = "# inputs-sha256: "


def read_pyproject(root: Path = ROOT) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())


def inputs_sha256(root: Path = ROOT) -> str:
    pyproject = read_pyproject(root)
    project = pyproject["project"]
    tables = {
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "build-system.requires": pyproject["build-system"]["requires"],
        # Its requirement lines only: a comment edit does not make the lock stale.
        "build.in": build_in(root),
    }
    return hashlib.sha256(json.dumps(tables, sort_keys=True).encode()).hexdigest()


def build_in(root: Path = ROOT) -> list[str]:
    """requirements/build.in's requirements, comments and blank lines left out."""
    lines = (root / BUILD_IN.relative_to(ROOT)).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def recorded_sha256(lock: Path = LOCK) -> str | None:
    first = lock.read_text().split("\n", 1)[0]
    return first[len(PREFIX) :].split()[0] if first.startswith(PREFIX) else None


def locked(lock: Path = LOCK) -> list[tuple[str, str, str | None, int]]:
    """Each entry of the lock: (name as written, version, its environment marker or None, how many hashes)."""
    entries: list[list] = []
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            pin, _, marker = line.rstrip(" \\").partition(" ; ")
            name, _, version = pin.partition("==")
            entries.append([name, version, marker or None, 0])
        elif line.strip().startswith("--hash=") and entries:
            entries[-1][3] += 1
    return [tuple(e) for e in entries]


def pins_for(python: str, machine: str, lock: Path = LOCK) -> dict[str, str]:
    """The locked version of each package for CPython ``python`` (e.g. "3.11") on Linux ``machine``, by canonical
    name; only the entries whose marker holds there."""
    from packaging.markers import Marker
    from packaging.utils import canonicalize_name

    env = linux_environment(python, machine)
    return {
        canonicalize_name(name): version
        for name, version, marker, _ in locked(lock)
        if marker is None or Marker(marker).evaluate(env)
    }


def linux_environment(python: str, machine: str) -> dict[str, str]:
    """PEP 508 marker variables of CPython ``python`` on Linux ``machine`` (not this interpreter's)."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "platform_machine": machine,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }


if __name__ == "__main__":
    sys.stdout.write(inputs_sha256() + "\n")
