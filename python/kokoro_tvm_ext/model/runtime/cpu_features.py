"""The architecture and instruction-set features an artifact's code needs, and whether this CPU has them.

``compile_kokoro`` lets LLVM use every feature of the CPU it targets (by default the
compiling machine's, e.g. AVX-512 on a Xeon). Such code dies with SIGILL on an older
CPU, so the artifact records the features in ``meta.json`` and ``KokoroTVM`` checks
them before loading: a clear error instead of a crash.

Names are LLVM's (``avx512f``, ``sse4.2``). Only the features below are recorded and
checked: instruction-set extensions that LLVM emits on its own for ordinary code
(vectors, bit manipulation, atomics). LLVM's tuning flags (``prefer-256-bit``), privileged
ones (``invpcid``) and those reached only through intrinsics (``mwaitx``, ``clzero``,
``xsave``, ``rdrnd``, ``aes``, ``movdiri``, AMX) are not instructions an artifact needs; a
hypervisor often hides the latter (an AMD EPYC VM lists no ``mwaitx``), and checking
them would refuse an artifact compiled on the very same machine. ``prfchw`` is left out
too: CPUs without it run PREFETCHW as a no-op. This CPU's features come from Linux's
``/proc/cpuinfo``, which lists only what both the CPU and the kernel enable (e.g. a
hypervisor that hides AVX-512 hides it there too).

On aarch64 the same holds with LLVM's ARM names (``neon``, ``dotprod``, ``i8mm``; ``CHECKED_AARCH64``), read
from the auxiliary vector's ``AT_HWCAP``/``AT_HWCAP2`` bits (``getauxval``), never from /proc/cpuinfo: under
qemu-user that file is the host's. ``meta.json`` names the architecture (``arch``: ``x86_64`` or ``aarch64``;
an artifact without it is x86_64, as every one before cross-compiling was): an artifact for another
architecture is refused before its features are compared.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import os
import platform
from pathlib import Path

import tvm_ffi

from kokoro_tvm_ext.model.runtime.artifact import META, RECOMPILE_HINT
from kokoro_tvm_ext.support.errors import ArtifactCorruptError, UnsupportedCPUError

# LLVM feature name -> the flag Linux shows in /proc/cpuinfo, where the two differ.
_CPUINFO_FLAG = {
    "sse3": "pni",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "sahf": "lahf_lm",
    "lzcnt": "abm",
    "bmi": "bmi1",
    "x87": "fpu",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect",
    "avxvnni": "avx_vnni",
}
# Features LLVM emits instructions for unasked whose /proc/cpuinfo flag has the same name
# (GFNI: LLVM lowers byte shifts and bit reversal with it).
_SAME_NAME = (
    "mmx",
    "fxsr",
    "sse",
    "sse2",
    "ssse3",
    "cx8",
    "cx16",
    "cmov",
    "popcnt",
    "movbe",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi2",
    "gfni",
    "sse4a",
    "fma4",
    "xop",
    "tbm",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512ifma",
    "avx512vbmi",
)
CHECKED = {**{name: name for name in _SAME_NAME}, **_CPUINFO_FLAG}

# aarch64: LLVM feature name -> (1 for AT_HWCAP or 2 for AT_HWCAP2, the bit Linux sets there), from Linux's
# arch/arm64/include/uapi/asm/hwcap.h. Only what LLVM emits for ordinary code (vectors, atomics, half and
# bfloat16 arithmetic, dot products, matrix multiply-accumulate, SVE), as for x86: not the crypto extensions
# (aes, sha2, sha3, sm4), pointer authentication or cache maintenance, reached through intrinsics only.
CHECKED_AARCH64 = {
    "fp-armv8": (1, 0),  # HWCAP_FP
    "neon": (1, 1),  # HWCAP_ASIMD
    "crc": (1, 7),  # HWCAP_CRC32
    "lse": (1, 8),  # HWCAP_ATOMICS
    "fullfp16": (1, 10),  # HWCAP_ASIMDHP (HWCAP_FPHP, bit 9, comes with it)
    "rdm": (1, 12),  # HWCAP_ASIMDRDM
    "jsconv": (1, 13),  # HWCAP_JSCVT
    "complxnum": (1, 14),  # HWCAP_FCMA
    "rcpc": (1, 15),  # HWCAP_LRCPC
    "dotprod": (1, 20),  # HWCAP_ASIMDDP
    "sve": (1, 22),  # HWCAP_SVE
    "fp16fml": (1, 23),  # HWCAP_ASIMDFHM
    "sve2": (2, 1),  # HWCAP2_SVE2
    "frintts": (2, 8),  # HWCAP2_FRINT
    "i8mm": (2, 13),  # HWCAP2_I8MM
    "bf16": (2, 14),  # HWCAP2_BF16
}
# The checked features of each architecture (LLVM's names), and the few that tell one level of it from another,
# named where an artifact is refused (its whole list would not fit a line).
FEATURES = {"x86_64": CHECKED, "aarch64": CHECKED_AARCH64}
HEADLINE = {
    "x86_64": ("avx2", "avx512f", "avx512vnni", "avx512bf16"),
    "aarch64": ("neon", "dotprod", "i8mm", "bf16", "sve", "sve2"),
}
# Where AT_HWCAP and AT_HWCAP2 are in the auxiliary vector (linux/auxvec.h).
AT_HWCAP, AT_HWCAP2 = 16, 26
# What Python's platform.machine() may say, as LLVM's architecture names (the triple's first part).
_ARCH_NAMES = {"amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64"}


def arch_name(name: str) -> str:
    """``name`` (from a target triple or ``platform.machine()``) as LLVM's architecture name: x86_64, aarch64."""
    name = str(name).lower()
    return _ARCH_NAMES.get(name, name)


def host_arch() -> str:
    """This machine's architecture: ``x86_64``, ``aarch64``, ..."""
    return arch_name(platform.machine() or "unknown")


def target_arch(target: dict | None) -> str:
    """The architecture a TVM LLVM target dict compiles for: its triple's first part, else this machine's."""
    triple = (target or {}).get("mtriple")
    return arch_name(str(triple).split("-")[0]) if triple else host_arch()


def artifact_arch(meta: dict) -> str:
    """The architecture an artifact's library was compiled for (x86_64 for one written before ``arch`` was)."""
    return meta.get("arch") or "x86_64"


def target_features(target) -> list[str]:
    """The checked features an LLVM target (a ``tvm.target.Target``) lets the code use, sorted: the table of
    its architecture (x86-64's, aarch64's; none for another).

    Needs the TVM compiler, so it is called at compile time only.
    """
    from tvm.target import codegen

    triple = str(target.attrs.get("mtriple", "") or "")
    checked = FEATURES.get(arch_name(triple.split("-")[0]) if triple else host_arch(), {})
    return sorted(set(codegen.llvm_get_cpu_features(target)) & checked.keys())


def aarch64_features(hwcap: int, hwcap2: int = 0) -> set[str]:
    """The checked aarch64 features (LLVM names) that ``AT_HWCAP`` and ``AT_HWCAP2`` say the CPU has."""
    words = {1: hwcap, 2: hwcap2}
    return {name for name, (word, bit) in CHECKED_AARCH64.items() if words[word] >> bit & 1}


def hwcaps() -> tuple[int, int]:
    """This process's ``AT_HWCAP`` and ``AT_HWCAP2`` (glibc's ``getauxval``; 0 where it has no such entry)."""
    getauxval = ctypes.CDLL(None).getauxval
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    return int(getauxval(AT_HWCAP)), int(getauxval(AT_HWCAP2))


def host_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's checked features (LLVM names): on aarch64 from the auxiliary vector, on x86 from
    /proc/cpuinfo's flags; None where neither tells (another architecture, no x86 flags)."""
    if host_arch() == "aarch64":
        try:
            return aarch64_features(*hwcaps())
        except (OSError, AttributeError):  # a C library without getauxval
            return None
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = set(value.split())
            return {name for name, flag in CHECKED.items() if flag in flags}
    return None


def _cpu_name(meta: dict) -> str:
    target = meta.get("target", {})
    return str(target.get("mcpu", "the default CPU") if isinstance(target, dict) else target)


def described(meta: dict) -> str:
    """What an artifact was compiled for, in a few words: ``aarch64 (cortex-a76: neon, dotprod)``."""
    arch = artifact_arch(meta)
    wanted = meta.get("cpu_features") or []
    headline = [f for f in HEADLINE.get(arch, ()) if f in wanted]
    return f"{arch} ({_cpu_name(meta)}{': ' + ', '.join(headline) if headline else ''})"


def other_arch_problem(meta: dict, where) -> str | None:
    """The one-line refusal of an artifact compiled for another architecture than this machine's, else None."""
    here = host_arch()
    if artifact_arch(meta) == here:
        return None
    return (
        f"{where} was compiled for {described(meta)}; this machine is {here}: compile Kokoro for this machine "
        f"(`kokoro-tvm compile`, or let `kokoro-tvm say` compile it), or run this artifact on an "
        f"{artifact_arch(meta)} machine"
    )


def missing_features(meta: dict, have: set[str] | None = None) -> list[str]:
    """The checked features the artifact (of this machine's architecture) needs that this CPU lacks."""
    have = host_features() if have is None else have
    if have is None:
        return []
    checked = FEATURES.get(artifact_arch(meta), {})
    return sorted(f for f in meta["cpu_features"] if f in checked and f not in have)


def check_cpu(meta: dict, where) -> None:
    """Raise ``UnsupportedCPUError`` if the artifact in ``where`` was compiled for another architecture than
    this machine's, or needs features this CPU lacks.

    A machine whose features cannot be read passes the features' check: there is nothing to compare. A
    ``meta`` without its list of features does not: that would skip the check.
    """
    wanted = meta.get("cpu_features")
    if not isinstance(wanted, list) or not all(isinstance(f, str) for f in wanted):
        raise ArtifactCorruptError(
            f"{where}: cpu_features in {META} must be a list of CPU feature names, got {wanted!r:.60}; {RECOMPILE_HINT}"
        )
    problem = other_arch_problem(meta, where)
    if problem:
        raise UnsupportedCPUError(problem)
    have = host_features()
    if meta.get("precision") == "int8":
        notice_int8_fallback(have)
    missing = missing_features(meta, have)
    if missing:
        cpu = _cpu_name(meta)
        older = OLDER_CPUS.get(artifact_arch(meta), OLDER_CPUS["x86_64"])
        raise UnsupportedCPUError(
            f"{where} was compiled for CPU {cpu} and needs instructions this CPU lacks: "
            f"{', '.join(missing)}. Compile it again on this machine (`kokoro-tvm compile`, or delete "
            "it and let `kokoro-tvm say` compile), or compile for an older CPU with "
            f"compile_kokoro(..., target={{'kind': 'llvm', 'mcpu': '{older[0]}'}}) (or '{older[1]}')"
        )


# Per architecture, what to compile for where a CPU lacks an artifact's features: a common level, an older one.
OLDER_CPUS = {"x86_64": ("x86-64-v3", "x86-64-v2"), "aarch64": ("cortex-a72", "generic")}


_int8_noticed = False
_fallback_noticed: set[str] = set()


@functools.cache
def precision_table() -> dict:
    """The Rust library's precision x instruction-set table (``tvm-ext/src/precision/table.rs``), the one place
    that says which micro-kernel runs for a precision on which instruction set: ``rows`` (precision, arch, isa: the
    LLVM feature that defines the set or ``portable``, name, kernel, tile, packing; per precision best first),
    ``selected`` (this process's pick per precision), ``hiding`` (precision -> the variable that hides its sets)."""
    return json.loads(str(tvm_ffi.get_global_func("kokoro_tvm_ext.precision_kernels")()))


def hiding_variable(precision: str) -> str | None:
    """The environment variable that hides ``precision``'s instruction sets (on every architecture), if any."""
    return precision_table()["hiding"].get(precision)


def native_features(precision: str, arch: str | None = None) -> tuple[tuple[str, ...], str]:
    """The CPU features (LLVM names) ``precision``'s kernels compute with on ``arch`` (None: this machine's), any one
    of them, and what a notice calls them (the least of them): the table's rows of its own micro-kernels."""
    arch = arch or host_arch()
    rows = [
        r
        for r in precision_table()["rows"]
        if r["precision"] == precision and r["arch"] == arch and r["isa"] != "portable"
    ]
    return tuple(r["isa"] for r in rows), (rows[-1]["name"] if rows else f"{precision} instructions")


def native_here(precision: str) -> bool:
    """Whether ``precision``'s kernels compute in it in this process: the Rust library's own pick from the running
    CPU (the table's ``selected`` row is not the portable loop)."""
    return precision == "fp32" or precision_table()["selected"].get(precision, "portable") != "portable"


def computes_natively(precision: str, have: set[str] | None, arch: str | None = None) -> bool:
    """Whether ``precision``'s kernels compute in it on a CPU of ``arch`` (None: this machine's) with the
    features ``have`` (fp32 always does): the CPU has one of its features and the variable does not hide them
    (the Rust kernels decide the same way, from the same table, on the CPU they run on: ``native_here``)."""
    variable = hiding_variable(precision)
    if variable is None:
        return True
    features, _ = native_features(precision, arch)
    hidden = os.environ.get(variable, "") not in ("", "0")
    return have is not None and any(f in have for f in features) and not hidden


def int8_native(have: set[str] | None, arch: str | None = None) -> bool:
    """Whether an int8 artifact computes in int8 here (AVX512-VNNI; on aarch64 dotprod or i8mm), not hidden by
    KOKORO_TVM_EXT_NO_VNNI."""
    return computes_natively("int8", have, arch)


def precision_here(precision: str, have: set[str] | None, arch: str | None = None) -> str:
    """The precision to build and run for a CPU of ``arch`` (None: this machine's) with the features ``have``:
    ``precision`` where its kernels compute in it, else fp32 with a one-line notice (once per process). Their
    fallback runs f32 kernels on dequantized weights without the fp32 artifact's Winograd: 1.5-1.8x slower than
    the fp32 artifact, so a fallback would only cost time."""
    if computes_natively(precision, have, arch):
        return precision
    if precision not in _fallback_noticed:
        _fallback_noticed.add(precision)
        _, name = native_features(precision, arch)
        logging.getLogger("kokoro_tvm_ext").warning(
            f"kokoro-tvm: this CPU lacks {name} (or {hiding_variable(precision)} is set): {precision} runs as fp32, "
            f"which is faster here than {precision}'s fallback kernels"
        )
    return "fp32"


def notice_int8_fallback(have: set[str] | None, arch: str | None = None) -> None:
    """One line, once per process, where an int8 artifact falls back to its f32 kernels."""
    global _int8_noticed
    if _int8_noticed or int8_native(have, arch):
        return
    _int8_noticed = True
    _, name = native_features("int8", arch)
    logging.getLogger("kokoro_tvm_ext").warning(
        f"kokoro-tvm: this CPU lacks {name} (or {hiding_variable('int8')} is set): the int8 artifact "
        "runs its convolutions and matmuls in fp32 on the dequantized weights"
    )


def host_cpu_id(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """A short id of this CPU model and its enabled features, for keying compiled artifacts
    without loading LLVM: on x86, vendor, family and model from /proc/cpuinfo and a hash of its
    flags (a VM that hides a feature gets another id, so it compiles its own artifact); on aarch64,
    the machine and a hash of its AT_HWCAP and AT_HWCAP2 bits (what /proc/cpuinfo says there may be
    the emulating host's)."""
    if host_arch() == "aarch64":
        try:
            caps = "{:x}-{:x}".format(*hwcaps())
        except (OSError, AttributeError):
            caps = platform.processor()
        return f"aarch64-{hashlib.sha256(caps.encode()).hexdigest()[:8]}"
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                if fields:
                    break  # the first processor's block is enough
                continue
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "flags" not in fields:
        described = f"{platform.machine()} {platform.processor()}"
        return f"{platform.machine() or 'cpu'}-{hashlib.sha256(described.encode()).hexdigest()[:8]}"
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(fields.get("vendor_id", ""), "x86")
    flags = hashlib.sha256(" ".join(sorted(fields["flags"].split())).encode()).hexdigest()[:8]
    return f"{vendor}-f{fields.get('cpu family', '0')}m{fields.get('model', '0')}-{flags}"
