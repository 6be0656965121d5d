"""The TVM wheels this plugin is built and tested against, and the check at import."""

from __future__ import annotations

import importlib.metadata

# The plugin links libtvm_ffi's C ABI and hands converters to TVM's importer,
# so both wheels are pinned exactly.
EXPECTED = {
    "apache-tvm": "0.27.0.post1",
    "apache-tvm-ffi": "0.1.15.post2",
}


def installed_versions() -> dict[str, str | None]:
    """The installed version of each pinned distribution, None when absent."""
    found: dict[str, str | None] = {}
    for dist in EXPECTED:
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def version_problems(found: dict[str, str | None]) -> list[str]:
    """One sentence per distribution whose version differs from EXPECTED."""
    problems = []
    for dist, want in EXPECTED.items():
        have = found.get(dist)
        if have is None:
            problems.append(f"{dist} is not installed (expected {want})")
        elif have != want:
            problems.append(f"{dist} {have} is installed, but kokoro-tvm-ext needs {dist}=={want}")
    return problems


def check_versions() -> None:
    """Raise ImportError naming expected and found versions on any mismatch."""
    problems = version_problems(installed_versions())
    if problems:
        pins = " ".join(f"{d}=={v}" for d, v in EXPECTED.items())
        raise ImportError("kokoro_tvm_ext cannot load: " + "; ".join(problems) + f". Fix it with: pip install {pins}")
