"""requirements/dev.lock against pyproject.toml: not stale, and every requirement of the package, of every extra
the lock covers, of the build, met by the locked version on each CPython and Linux machine it is for.

Refresh with `bash scripts/lock.sh` (docs/install.md)."""

from __future__ import annotations

import importlib.util
import itertools
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("lock_inputs", ROOT / "scripts" / "lock_inputs.py")
lock_inputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock_inputs)

PYPROJECT = lock_inputs.read_pyproject()
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
# Extras the lock leaves out, and why: the companion wheel of prebuilt libraries is not on PyPI.
NOT_LOCKED = {"prebuilt"}
# torch 2.15 has no CPython 3.10 wheels, so the lock (and setup.sh's default extras) starts at 3.11.
PYTHONS = ("3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")
STALE = "requirements/dev.lock is stale: run `bash scripts/lock.sh`"


def _locked_extras(extra: str = "dev") -> set[str]:
    """``extra`` and every extra it names through the package itself (``kokoro-tvm-ext[speak]``)."""
    seen, todo = set(), [extra]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [
                x for r in map(Requirement, EXTRAS[name]) if canonicalize_name(r.name) == PROJECT for x in r.extras
            ]
    return seen


def _requirements() -> list[tuple[str, Requirement]]:
    """(where it is written, requirement) for everything the lock must meet; the package's own extras left out."""
    tables = [("dependencies", PYPROJECT["project"]["dependencies"])]
    tables += [(f"[{extra}]", EXTRAS[extra]) for extra in sorted(_locked_extras())]
    tables += [("build-system.requires", PYPROJECT["build-system"]["requires"])]
    tables += [("requirements/build.in", lock_inputs.build_in())]
    return [
        (where, r) for where, reqs in tables for r in map(Requirement, reqs) if canonicalize_name(r.name) != PROJECT
    ]


def test_the_lock_was_compiled_from_this_pyproject():
    recorded = lock_inputs.recorded_sha256()
    assert recorded is not None, f"{STALE} (no '{lock_inputs.PREFIX.strip()}' first line)"
    assert recorded == lock_inputs.inputs_sha256(), STALE


def test_every_extra_but_the_unpublished_is_locked():
    assert set(EXTRAS) - _locked_extras() == NOT_LOCKED


@pytest.mark.parametrize("python,machine", list(itertools.product(PYTHONS, MACHINES)))
def test_each_requirement_is_met_by_its_locked_version(python, machine):
    pins = lock_inputs.pins_for(python, machine)
    env = lock_inputs.linux_environment(python, machine) | {"extra": ""}
    unmet = []
    for where, req in _requirements():
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        version = pins.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            unmet.append(f"{where}: {req} (locked: {version})")
    assert not unmet, f"{STALE}\n" + "\n".join(unmet)


def test_every_locked_package_is_pinned_with_hashes():
    entries = lock_inputs.locked()
    assert len(entries) > 100
    assert [name for name, version, _, hashes in entries if not version or not hashes] == []


def test_what_installs_without_its_requirements_is_pinned_with_hashes_and_needs_only_the_dev_extras():
    """requirements/no-deps.lock pins each line of no-deps.in with hashes (scripts/lock.sh), and whatever each
    needs is in the dev lock but what no-deps.in names as the reason (webrtcvad: its module comes from
    webrtcvad-wheels)."""
    from importlib.metadata import requires

    root = Path(lock_inputs.__file__).resolve().parent.parent / "requirements"
    wanted = {
        Requirement(line).name: Requirement(line)
        for line in (root / "no-deps.in").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    lock = (root / "no-deps.lock").read_text()
    for name, req in wanted.items():
        pinned = re.search(rf"^{re.escape(name)}==(\S+) \\\n\s+--hash=sha256:", lock, re.M)
        assert pinned and req.specifier.contains(pinned.group(1)), f"{name}: {STALE}"
    locked = {canonicalize_name(name) for name, *_ in lock_inputs.locked()}
    for name in wanted:
        needs = {canonicalize_name(Requirement(r).name) for r in requires(name) or () if "extra ==" not in r}
        assert needs - locked <= {"webrtcvad", "typing"}, f"{name} needs {needs - locked}"
