"""Exit non-zero unless ``auditwheel show`` supports the wheel's manylinux tag.

The one allowed exception is libtvm_ffi.so, which the apache-tvm-ffi wheel provides
(bundling it would make a second FFI registry): auditwheel must name it as the only
external library and the only thing standing between the wheel and its tag.

Usage: python scripts/check_wheel_tag.py WHEEL
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROVIDED_BY_DEPENDENCY = {"libtvm_ffi.so"}


def problems(wheel: Path) -> list[str]:
    tag = wheel.name[: -len(".whl")].split("-")[-1]
    report = json.loads(
        subprocess.run(
            [sys.executable, "-m", "auditwheel", "show", "--json", str(wheel)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    found = []
    if not tag.startswith("manylinux_"):
        found.append(f"the wheel is tagged {tag}, not manylinux: a package index rejects it")
    if report["sym_tag"] != tag:
        found.append(f"its glibc symbol versions allow {report['sym_tag']}, the tag says {tag}")
    if set(report["external_libs"]) != PROVIDED_BY_DEPENDENCY:
        found.append(
            f"external libraries {sorted(report['external_libs'])}, want only {sorted(PROVIDED_BY_DEPENDENCY)}"
        )
    blocking = set(report["policy_upgrades"].get(tag, {}).get("libs_to_eliminate", []))
    if blocking - PROVIDED_BY_DEPENDENCY:
        found.append(f"{tag} would also need {sorted(blocking - PROVIDED_BY_DEPENDENCY)} removed")
    if report["unsupported_isa"]:
        found.append("auditwheel reports instructions beyond the x86-64 level of the tag")
    return found


def main() -> int:
    (wheel,) = sys.argv[1:]
    found = problems(Path(wheel))
    for p in found:
        print(f"error: {wheel}: {p}", file=sys.stderr)
    if not found:
        print(f"ok: auditwheel agrees with the tag of {Path(wheel).name} (libtvm_ffi.so comes from apache-tvm-ffi)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
