"""The x86 instruction-set features an artifact's code needs, and whether this CPU has them.

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
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
from pathlib import Path

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


def target_features(target) -> list[str]:
    """The checked features an LLVM target (a ``tvm.target.Target``) lets the code use, sorted.

    Needs the TVM compiler, so it is called at compile time only.
    """
    from tvm.target import codegen

    return sorted(set(codegen.llvm_get_cpu_features(target)) & CHECKED.keys())


def host_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's checked features (LLVM names), or None where /proc/cpuinfo has no x86 flags."""
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


def check_cpu(meta: dict, where) -> None:
    """Raise ``UnsupportedCPUError`` if the artifact in ``where`` needs features this CPU lacks.

    A machine whose features cannot be read passes: there is nothing to compare. A
    ``meta`` without its list of features does not: that would skip the check.
    """
    wanted = meta.get("cpu_features")
    if not isinstance(wanted, list) or not all(isinstance(f, str) for f in wanted):
        raise ArtifactCorruptError(
            f"{where}: cpu_features in {META} must be a list of CPU feature names, got {wanted!r:.60}; {RECOMPILE_HINT}"
        )
    have = host_features()
    if meta.get("precision") == "int8":
        notice_int8_fallback(have)
    if have is None:
        return
    missing = sorted(f for f in wanted if f in CHECKED and f not in have)
    if missing:
        target = meta.get("target", {})
        cpu = target.get("mcpu", "the default CPU") if isinstance(target, dict) else target
        raise UnsupportedCPUError(
            f"{where} was compiled for CPU {cpu} and needs instructions this CPU lacks: "
            f"{', '.join(missing)}. Compile it again on this machine (`kokoro-tvm compile`, or delete "
            "it and let `kokoro-tvm say` compile), or compile for an older CPU with "
            "compile_kokoro(..., target={'kind': 'llvm', 'mcpu': 'x86-64-v3'}) (or 'x86-64-v2')"
        )


_int8_noticed = False
_fallback_noticed: set[str] = set()

# precision -> (the CPU feature its kernels compute with, the variable that hides it, as the Rust kernels read them)
NATIVE_FEATURES = {
    "int8": ("avx512vnni", "KOKORO_TVM_EXT_NO_VNNI", "AVX512-VNNI"),
    "bf16": ("avx512bf16", "KOKORO_TVM_EXT_NO_BF16", "AVX512-BF16"),
}


def computes_natively(precision: str, have: set[str] | None) -> bool:
    """Whether ``precision``'s kernels compute in it here (fp32 always does): the CPU has the feature and its
    variable does not hide it (the Rust kernels decide the same way)."""
    if precision not in NATIVE_FEATURES:
        return True
    feature, hiding, _ = NATIVE_FEATURES[precision]
    hidden = os.environ.get(hiding, "") not in ("", "0")
    return have is not None and feature in have and not hidden


def int8_native(have: set[str] | None) -> bool:
    """Whether an int8 artifact computes in int8 here (AVX512-VNNI, not hidden by KOKORO_TVM_EXT_NO_VNNI)."""
    return computes_natively("int8", have)


def precision_here(precision: str, have: set[str] | None) -> str:
    """The precision to build and run for this CPU: ``precision`` where its kernels compute in it, else fp32 with
    a one-line notice (once per process). Their fallback runs f32 kernels on dequantized weights without the fp32
    artifact's Winograd: 1.5-1.8x slower than the fp32 artifact, so a fallback would only cost time."""
    if computes_natively(precision, have):
        return precision
    if precision not in _fallback_noticed:
        _fallback_noticed.add(precision)
        _, hiding, name = NATIVE_FEATURES[precision]
        logging.getLogger("kokoro_tvm_ext").warning(
            f"kokoro-tvm: this CPU lacks {name} (or {hiding} is set): {precision} runs as fp32, "
            f"which is faster here than {precision}'s fallback kernels"
        )
    return "fp32"


def notice_int8_fallback(have: set[str] | None) -> None:
    """One line, once per process, where an int8 artifact falls back to its f32 kernels."""
    global _int8_noticed
    if _int8_noticed or int8_native(have):
        return
    _int8_noticed = True
    logging.getLogger("kokoro_tvm_ext").warning(
        "kokoro-tvm: this CPU lacks AVX512-VNNI (or KOKORO_TVM_EXT_NO_VNNI is set): the int8 artifact "
        "runs its convolutions and matmuls in fp32 on the dequantized weights"
    )


def host_cpu_id(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """A short id of this CPU model and its enabled features, for keying compiled artifacts
    without loading LLVM: vendor, family and model from /proc/cpuinfo and a hash of its
    flags (a VM that hides a feature gets another id, so it compiles its own artifact)."""
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
