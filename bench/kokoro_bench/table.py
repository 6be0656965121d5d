"""Benchmark helpers: timing, thread pinning, machine description, table printing."""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

from kokoro_tvm_ext.model.runtime import cpu_features


def median_seconds(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# The vector extensions our kernels and the peers choose between at run time, as Linux names them: on x86 in
# /proc/cpuinfo's flags (AMX: Sapphire Rapids and later); on aarch64 in its Features (asimd: NEON; asimdhp: fp16
# arithmetic; asimddp: SDOT/UDOT; i8mm: SMMLA; bf16: BFDOT/BFMMLA; sve, sve2).
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
ARM_FEATURES = ("asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2")
# Linux's name of an aarch64 feature -> LLVM's, whose AT_HWCAP/AT_HWCAP2 bit ``cpu_features`` knows.
_ARM_LLVM = {"asimd": "neon", "asimdhp": "fullfp16", "asimddp": "dotprod"}
# /proc/cpuinfo's "CPU implementer" and, for ARM's own cores, "CPU part" (Linux's arch/arm64/include/asm/cputype.h),
# with the machines they are in.
ARM_IMPLEMENTERS = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x51: "Qualcomm",
    0x61: "Apple",
    0xC0: "Ampere",
}
ARM_PARTS = {
    0xD03: "Cortex-A53 (Pi 3 class)",
    0xD04: "Cortex-A35",
    0xD05: "Cortex-A55",
    0xD07: "Cortex-A57",
    0xD08: "Cortex-A72 (Pi 4 class)",
    0xD0B: "Cortex-A76 (Pi 5 class)",
    0xD0C: "Neoverse N1 (Graviton 2 class)",
    0xD40: "Neoverse V1 (Graviton 3 class)",
    0xD49: "Neoverse N2",
    0xD4F: "Neoverse V2 (Graviton 4 class)",
}
# Where Linux shows the first CPU's MIDR_EL1 (implementer, part) when /proc/cpuinfo does not.
MIDR = Path("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1")


def _processors(cpuinfo: str) -> list[dict]:
    """The blocks of a /proc/cpuinfo text, one dict of fields per processor (lines after the last one, such as a
    Raspberry Pi's ``Model``, go to every processor that lacks them)."""
    blocks, trailer = [], {}
    for block in cpuinfo.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip(), value.strip())
        if "processor" in fields:
            blocks.append(fields)
        elif fields:
            trailer |= fields
    return [trailer | b for b in blocks] or ([trailer] if trailer else [])


def _arm_core(implementer: str | int | None, part: str | int | None) -> str | None:
    """``ARM Cortex-A76 (Pi 5 class)`` for implementer 0x41, part 0xd0b; the raw numbers for a core not listed."""
    if implementer is None:
        return None
    implementer, part = int(str(implementer), 0), None if part is None else int(str(part), 0)
    vendor = ARM_IMPLEMENTERS.get(implementer, f"implementer {implementer:#x}")
    if implementer == 0x41 and part in ARM_PARTS:
        return f"{vendor} {ARM_PARTS[part]}"
    return vendor + ("" if part is None else f" part {part:#x}")


def cpu_facts(cpuinfo: str, hwcaps: tuple[int, int] | None = None) -> dict:
    """A /proc/cpuinfo text's CPU: ``arch``, ``name``, ``family`` and ``model`` (x86; None where absent), and which
    of the ISA extensions our kernels choose between it has (``flags``) and lacks (``absent``), in the order of
    ``ISA_FLAGS`` (x86) or ``ARM_FEATURES`` (aarch64).

    aarch64 is told by its fields (``CPU implementer``, ``Features``) or by ``hwcaps`` (``AT_HWCAP``,
    ``AT_HWCAP2``), which, when given, say the features instead of the text's ``Features`` line (under qemu-user
    /proc/cpuinfo is the host's). Its name is each kind of core with its count (``4x ARM Cortex-A76 (Pi 5 class)
    + 4x ARM Cortex-A55`` on a big.LITTLE board), the board's ``Model`` line where the kernel writes one."""
    processors = _processors(cpuinfo)
    first = processors[0] if processors else {}
    if hwcaps is None and "CPU implementer" not in first and "Features" not in first:
        flags = set(first.get("flags", "").split())
        return {
            "arch": "x86_64",
            "name": first.get("model name"),
            "family": first.get("cpu family"),
            "model": first.get("model"),
            "flags": [f for f in ISA_FLAGS if f in flags],
            "absent": [f for f in ISA_FLAGS if f not in flags],
        }
    if hwcaps is not None:
        have = cpu_features.aarch64_features(*hwcaps)
        features = {f for f in ARM_FEATURES if _ARM_LLVM.get(f, f) in have}
    else:
        features = set(first.get("Features", "").split())
    cores: dict[str, int] = {}
    for p in processors:
        core = _arm_core(p.get("CPU implementer"), p.get("CPU part"))
        if core:
            cores[core] = cores.get(core, 0) + 1
    if len(cores) > 1:
        name = " + ".join(f"{n}x {core}" for core, n in cores.items())
    else:
        name = next(iter(cores), None) or first.get("model name")
    if name and first.get("Model"):
        name += f", {first['Model']}"
    return {
        "arch": "aarch64",
        "name": name,
        "family": None,
        "model": None,
        "flags": [f for f in ARM_FEATURES if f in features],
        "absent": [f for f in ARM_FEATURES if f not in features],
    }


def _this_cpu() -> tuple[str, tuple[int, int] | None]:
    """This machine's /proc/cpuinfo text (with its MIDR from sysfs where that text names no core) and, on
    aarch64, its ``AT_HWCAP`` and ``AT_HWCAP2``."""
    try:
        with open("/proc/cpuinfo") as f:
            cpuinfo = f.read()
    except OSError:  # not Linux: the name only
        cpuinfo = ""
    if cpu_features.host_arch() != "aarch64":
        return cpuinfo, None
    try:
        caps = cpu_features.hwcaps()
    except (OSError, AttributeError):  # a C library without getauxval
        caps = None
    if "CPU implementer" not in cpuinfo:
        try:
            midr = int(MIDR.read_text(), 16)
        except (OSError, ValueError):  # under qemu-user: the x86 host's text, no such file
            cpuinfo = ""
        else:
            cpuinfo = f"processor\t: 0\nCPU implementer\t: {midr >> 24:#x}\nCPU part\t: {midr >> 4 & 0xFFF:#x}\n"
    return cpuinfo, caps if caps is not None or "Features" in cpuinfo else (0, 0)


def machine_line(threads, cpuinfo: str | None = None, hwcaps: tuple[int, int] | None = None) -> str:
    """The CPU (name; on x86 its family/model; which of ``ISA_FLAGS`` or ``ARM_FEATURES`` it has and lacks), the
    thread counts used (an int, or several: each row ran at each) and Python; ``cpuinfo`` (and, on aarch64,
    ``hwcaps``: see ``cpu_facts``) default to this machine's."""
    if cpuinfo is None:
        cpuinfo, hwcaps = _this_cpu()
    facts = cpu_facts(cpuinfo, hwcaps)
    arm = facts["arch"] == "aarch64"
    known = ARM_FEATURES if arm else ISA_FLAGS
    cpu = facts["name"] or (
        "aarch64, a CPU /proc/cpuinfo does not name (emulated?)" if arm else platform.processor() or platform.machine()
    )
    if facts["family"] is not None:
        cpu += f" (family {facts['family']} model {facts['model'] or '?'})"
    counts = sorted({threads} if isinstance(threads, int) else set(threads))
    used = " and ".join(map(str, counts)) + (" thread" if counts == [1] else " threads")
    return (
        f"machine: {cpu}; {'features' if arm else 'flags'}: {' '.join(facts['flags']) or 'none of ' + ' '.join(known)}"
        + (f" (no {' '.join(facts['absent'])})" if facts["flags"] and facts["absent"] else "")
        + f"; {os.cpu_count()} cores visible, {used} used; python {platform.python_version()}"
    )


def set_threads(threads: int) -> None:
    """Pin every runtime we compare to the same thread count (before they start pools)."""
    for var in ("TVM_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(threads)


def print_table(headers: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
