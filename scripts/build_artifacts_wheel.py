"""Build the companion wheels kokoro-tvm-ext-artifacts: Kokoro compiled for portable CPU levels, no weights.

    python scripts/build_artifacts_wheel.py OUT_DIR                       # compile every level (minutes each)
    python scripts/build_artifacts_wheel.py OUT_DIR --artifact NAME=DIR   # pack compiled artifacts as they are

Each level is compiled with random weights (the library does not depend on them; the user's checkpoint is
bound at first use, model/binding.py), stripped to its library (model/prebuilt.py: library_only) and
packed as kokoro_tvm_ext_artifacts/<level>/ in a pure-data wheel of kokoro-tvm-ext's version, which the
runtime finds and picks from by this CPU's features. A compiled level is kept in the user cache under
release-levels/, keyed by the compiler's sources, so a rebuild without changes does not compile again.
Levels of another architecture (cortex-a72, cortex-a76 on an x86 machine) are cross-compiled (library-only
from the start: model/compile.py); each architecture gets a wheel of its own.

A wheel's tag is its architecture and the newest glibc its libraries link against (TVM links them with this
machine's toolchain: exp, log and pow take glibc 2.29's versions), so pip refuses it where they could not load.
Needs the `compile` extra (for compiling) and the `wheel` package.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

from elftools.elf.elffile import ELFFile

from kokoro_tvm_ext.model.prebuilt import DISTRIBUTION, LEVELS, PACKAGE, library_only
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, read_meta
from kokoro_tvm_ext.model.runtime.cpu_features import artifact_arch

OLDEST_GLIBC = (2, 17)  # manylinux2014, the oldest tag pip still installs by glibc version


def compiled_level(level: str) -> Path:
    """Kokoro compiled for ``level`` (an LLVM CPU name) with random weights, from the cache or compiled now."""
    import tvm  # noqa: F401  (the full TVM, compiler included, before anything loads its runtime alone)

    from kokoro_tvm_ext.model.artifact_cache import compiler_fingerprint, ensure_compiled, target_spec
    from kokoro_tvm_ext.model.config import load_config
    from kokoro_tvm_ext.model.weights.kmodel import build_kmodel
    from kokoro_tvm_ext.support.cache import cache_dir
    from kokoro_tvm_ext.support.versions import installed_versions

    out = cache_dir() / "release-levels" / f"{level}-tvm{installed_versions()['apache-tvm']}-{compiler_fingerprint()}"
    print(f"==> {level}: {out}", flush=True)
    return ensure_compiled(out, lambda: build_kmodel(load_config(), seed=0), target=target_spec(level))


# ELF e_machine (pyelftools' name) -> the architecture's name in a wheel's platform tag
WHEEL_ARCH = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def platform_tag(libraries: list[Path]) -> str:
    """The manylinux platform tag of the libraries: their architecture and the newest glibc symbol version they
    need."""
    newest, machines = OLDEST_GLIBC, set()
    for library in libraries:
        with open(library, "rb") as f:
            elf = ELFFile(f)
            machines.add(WHEEL_ARCH[elf.header["e_machine"]])
            section = elf.get_section_by_name(".gnu.version_r")
            for _needed, versions in section.iter_versions() if section is not None else ():
                for version in versions:
                    if version.name.startswith("GLIBC_"):
                        newest = max(newest, tuple(int(n) for n in version.name[len("GLIBC_") :].split(".")[:2]))
    (arch,) = machines  # one architecture a wheel
    return f"manylinux_{newest[0]}_{newest[1]}_{arch}"


def build_wheel(levels: dict[str, Path], out_dir: Path, version: str) -> Path:
    """The wheel holding each artifact of ``levels`` (name -> directory) without its weights."""
    with tempfile.TemporaryDirectory() as staging:
        root = Path(staging) / f"{PACKAGE.replace('_', '-')}-{version}"
        package = root / PACKAGE
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f'"""Kokoro-82M compiled for portable CPU levels, for kokoro-tvm-ext {version}: one library per '
            'directory, no weights (kokoro-tvm binds a checkpoint to the best one this CPU runs)."""\n\n'
            f'__version__ = "{version}"\n'
        )
        for name, artifact in levels.items():
            library_only(artifact, package / name)
        info = root / f"{PACKAGE}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: {version}\n"
            f"Summary: Kokoro-82M compiled for portable CPU levels (no weights), for kokoro-tvm-ext {version}\n"
            "License: Apache-2.0\nRequires-Python: >=3.10\n"
        )
        tag = f"py3-none-{platform_tag(sorted(package.glob(f'*/{LIBRARY}')))}"
        (info / "WHEEL").write_text(
            "Wheel-Version: 1.0\nGenerator: kokoro-tvm-ext scripts/build_artifacts_wheel.py\n"
            f"Root-Is-Purelib: false\nTag: {tag}\n"
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        for old in out_dir.glob(f"{PACKAGE}-*-{tag}.whl"):
            old.unlink()
        # `wheel pack` writes RECORD (every file's sha256) and names the wheel from WHEEL's tag.
        subprocess.run([sys.executable, "-m", "wheel", "pack", "--dest-dir", str(out_dir), str(root)], check=True)
    (wheel,) = out_dir.glob(f"{PACKAGE}-{version}-{tag}.whl")
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--levels", default=",".join(LEVELS), help="LLVM CPUs to compile for (default: %(default)s)")
    parser.add_argument(
        "--artifact",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="pack this compiled artifact as level NAME instead of compiling (repeatable)",
    )
    args = parser.parse_args()
    if args.artifact:
        levels = {name: Path(path) for name, _, path in (a.partition("=") for a in args.artifact)}
    else:
        levels = {level: compiled_level(level) for level in args.levels.split(",") if level}
    by_arch: dict[str, dict[str, Path]] = {}
    for name, artifact in levels.items():
        by_arch.setdefault(artifact_arch(read_meta(artifact)), {})[name] = artifact
    for group in by_arch.values():
        wheel = build_wheel(group, args.out_dir, importlib.metadata.version("kokoro-tvm-ext"))
        print(f"==> {wheel} ({wheel.stat().st_size / 1e6:.1f} MB): {', '.join(group)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
