"""Artifacts record the CPU features their code needs and refuse a CPU that lacks them.

References: Linux's /proc/cpuinfo flags (read here, independently of the module)
and LLVM's definitions of named CPUs (Haswell has AVX2 and no AVX-512, Nehalem
stops at SSE4.2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import kokoro_tvm_ext
from kokoro_tvm_ext.model.runtime.artifact import sealed
from kokoro_tvm_ext.model.runtime.cpu_features import UnsupportedCPUError, host_features, target_features

# Features that a current x86 CPU may lack, with their /proc/cpuinfo names: AMX and
# AVX512-FP16 are Sapphire Rapids and later; XOP and FMA4 were AMD's before Zen.
MAYBE_ABSENT = [
    ("xop", "xop"),
    ("fma4", "fma4"),
    ("avx512fp16", "avx512_fp16"),
    ("avx512vp2intersect", "avx512_vp2intersect"),
]


def cpuinfo_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("no x86 flags in /proc/cpuinfo")


def llvm_target(mcpu: str):
    import tvm

    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu})


def test_linux_flag_names_become_llvm_feature_names(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\n"
        "flags\t\t: fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma bmi1 abm lahf_lm avx512_vnni hypervisor\n"
    )
    assert host_features(cpuinfo) == {
        "x87",
        "sse",
        "sse2",
        "sse3",
        "ssse3",
        "sse4.1",
        "sse4.2",
        "avx",
        "avx2",
        "fma",
        "bmi",
        "lzcnt",
        "sahf",
        "avx512vnni",
    }


def test_a_machine_without_x86_flags_is_unknown_not_empty(tmp_path):
    arm = tmp_path / "cpuinfo"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm\n")
    assert host_features(arm) is None
    assert host_features(tmp_path / "missing") is None


def test_target_features_follow_llvm_cpu_definitions():
    haswell = set(target_features(llvm_target("haswell")))
    assert {"sse4.2", "avx", "avx2", "fma", "bmi2"} <= haswell
    assert not {f for f in haswell if f.startswith("avx512")}
    nehalem = set(target_features(llvm_target("nehalem")))
    assert {"sse2", "ssse3", "sse4.1", "sse4.2", "popcnt"} <= nehalem
    assert not nehalem & {"avx", "avx2", "fma"}
    # LLVM's tuning flags are not instructions: never recorded.
    assert not {f for f in haswell | nehalem if f.startswith(("fast-", "slow-", "prefer-"))}


def test_instructions_reached_only_through_intrinsics_are_not_required():
    """Zen 4 has MWAITX, CLZERO, XSAVE and RDRAND, which LLVM never emits for plain code; an AMD EPYC
    VM hides MWAITX from /proc/cpuinfo, and requiring it refused artifacts compiled on that VM."""
    znver4 = set(target_features(llvm_target("znver4")))
    assert {"avx512f", "avx512bf16", "avx2", "fma", "bmi2"} <= znver4
    assert not znver4 & {"mwaitx", "clzero", "xsave", "xsaves", "rdrnd", "rdseed", "aes", "sha", "prfchw"}


def test_a_compiled_artifact_records_the_features_of_this_cpu(small_artifact):
    recorded = set(json.loads((small_artifact / "meta.json").read_text())["cpu_features"])
    flags = cpuinfo_flags()
    assert {"sse", "sse2"} <= recorded
    for feature, flag in [("avx2", "avx2"), ("fma", "fma"), ("avx512f", "avx512f"), ("avx512bw", "avx512bw")]:
        assert (feature in recorded) == (flag in flags), feature
    kokoro_tvm_ext.KokoroTVM(small_artifact)  # this CPU has them all: it loads


def artifact_claiming(artifact: Path, out: Path, extra_feature: str) -> Path:
    """``artifact`` with ``extra_feature`` added to its meta.json (the other files are linked, not copied)."""
    meta = json.loads((artifact / "meta.json").read_text())
    meta["cpu_features"] = sorted(meta["cpu_features"] + [extra_feature])
    out.mkdir()
    (out / "meta.json").write_text(json.dumps(sealed(meta)))  # digests recomputed, as a compile would write them
    for name in ("kokoro.so", "weights.bin"):
        (out / name).symlink_to(artifact / name)
    return out


@pytest.fixture
def lacking_feature() -> str:
    flags = cpuinfo_flags()
    absent = [feature for feature, flag in MAYBE_ABSENT if flag not in flags]
    if not absent:
        pytest.skip(f"this CPU has every one of {[f for f, _ in MAYBE_ABSENT]}")
    return absent[0]


def test_an_artifact_for_a_feature_this_cpu_lacks_is_refused_by_name(small_artifact, tmp_path, lacking_feature):
    fake = artifact_claiming(small_artifact, tmp_path / "newer-cpu", lacking_feature)
    with pytest.raises(UnsupportedCPUError, match=rf"lacks: {re.escape(lacking_feature)}\. Compile it again"):
        kokoro_tvm_ext.KokoroTVM(fake)


def test_say_reports_the_refusal_without_a_traceback(small_artifact, tmp_path, lacking_feature, capsys):
    from kokoro_tvm_ext.cli import main

    fake = artifact_claiming(small_artifact, tmp_path / "newer-cpu", lacking_feature)
    voice = tmp_path / "voice.npy"
    np.save(voice, np.zeros((510, 1, 256), np.float32))
    out = tmp_path / "out.wav"
    rc = main(["say", "--artifact", str(fake), "--phonemes", "hˈɛlO", "--voice", str(voice), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 3  # the CPU cannot run this artifact: exit 3, as for a damaged one
    assert f"needs instructions this CPU lacks: {lacking_feature}" in err and "Traceback" not in err
    assert not out.exists()


# aarch64: AT_HWCAP/AT_HWCAP2 as QEMU 7.2's CPU models report them (NOTES: 0x8fb as cortex-a72, 0x119ffb as
# cortex-a76; `max,sve=off` adds i8mm and bf16 in AT_HWCAP2), checked against a real run below.
CORTEX_A72 = {"fp-armv8", "neon", "crc"}
CORTEX_A76 = CORTEX_A72 | {"lse", "fullfp16", "rdm", "rcpc", "dotprod"}


def test_hwcap_bits_become_llvm_feature_names():
    from kokoro_tvm_ext.model.runtime.cpu_features import aarch64_features

    assert aarch64_features(0x8FB, 0) == CORTEX_A72  # aes, pmull, sha1, sha2, cpuid: not checked
    assert aarch64_features(0x119FFB, 0) == CORTEX_A76
    no_sve = aarch64_features(0xECBFFFFB, 0x76181)
    assert CORTEX_A76 | {"i8mm", "bf16", "fp16fml", "jsconv", "complxnum", "frintts"} == no_sve
    assert {"sve", "sve2"} <= aarch64_features(0xECFFFFFB, 0x7F877FFF)
    assert aarch64_features(0, 0) == set()


def test_llvm_arm_cpus_need_what_those_cpus_report():
    """What LLVM lets code for cortex-a72 (a76) use is what Linux reports on one (as QEMU emulates it)."""
    import tvm

    def arm(mcpu):
        return tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": mcpu})

    assert set(target_features(arm("cortex-a72"))) == CORTEX_A72
    assert set(target_features(arm("cortex-a76"))) == CORTEX_A76
    assert {"i8mm", "bf16", "sve", "dotprod"} <= set(target_features(arm("neoverse-v1")))
    assert not {"aes", "sha2", "v8.2a", "a76"} & set(target_features(arm("cortex-a76")))  # intrinsics, levels, tuning


def test_on_aarch64_the_features_come_from_the_auxiliary_vector(tmp_path, monkeypatch):
    """Never from /proc/cpuinfo there: under qemu-user it is the host's (here an x86 one, with flags)."""
    from kokoro_tvm_ext.model.runtime import cpu_features

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse sse2 avx avx2\n")
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpu_features, "hwcaps", lambda: (0x119FFB, 0))
    assert cpu_features.host_arch() == "aarch64"
    assert host_features(cpuinfo) == CORTEX_A76
    a76 = cpu_features.host_cpu_id(cpuinfo)
    assert a76.startswith("aarch64-") and a76 == cpu_features.host_cpu_id()
    monkeypatch.setattr(cpu_features, "hwcaps", lambda: (0x8FB, 0))
    assert host_features(cpuinfo) == CORTEX_A72 and cpu_features.host_cpu_id() != a76
    # Here int8 computes with SDOT (USMMLA with i8mm), bf16 with BFDOT.
    for var in ("KOKORO_TVM_EXT_NO_VNNI", "KOKORO_TVM_EXT_NO_BF16"):
        monkeypatch.delenv(var, raising=False)
    assert [cpu_features.precision_here(p, CORTEX_A76 | {"i8mm", "bf16"}) for p in ("int8", "bf16")] == [
        "int8",
        "bf16",
    ]


# Hand-written feature sets of ARM machines, as aarch64_features decodes them: a Raspberry Pi 4 (Cortex-A72: no
# dot products), a Pi 5 (Cortex-A76: dotprod), a Graviton 3 (Neoverse V1: dotprod, i8mm, bf16, SVE).
PI_4 = CORTEX_A72
PI_5 = CORTEX_A76
GRAVITON_3 = CORTEX_A76 | {"fp16fml", "jsconv", "complxnum", "frintts", "sve", "i8mm", "bf16"}


@pytest.mark.parametrize(
    "have, int8, bf16",
    [
        (PI_4, "fp32", "fp32"),
        (PI_5, "int8", "fp32"),
        (GRAVITON_3, "int8", "bf16"),
        ({"neon", "i8mm"}, "int8", "fp32"),
        (None, "fp32", "fp32"),
    ],
    ids=["pi4", "pi5", "graviton3", "i8mm-only", "unknown"],
)
def test_on_aarch64_int8_needs_dotprod_or_i8mm_and_bf16_needs_bf16(monkeypatch, have, int8, bf16):
    """As the Rust kernels decide: SDOT with dotprod, USMMLA with i8mm, BFDOT with bf16."""
    from kokoro_tvm_ext.model.runtime import cpu_features

    for var in ("KOKORO_TVM_EXT_NO_VNNI", "KOKORO_TVM_EXT_NO_BF16"):
        monkeypatch.delenv(var, raising=False)
    assert cpu_features.precision_here("int8", have, arch="aarch64") == int8
    assert cpu_features.int8_native(have, arch="aarch64") == (int8 == "int8")
    assert cpu_features.precision_here("bf16", have, arch="aarch64") == bf16
    # x86's features mean nothing there, and the other way round.
    assert not cpu_features.int8_native({"avx512f", "avx512vnni"}, arch="aarch64")
    assert not cpu_features.int8_native(PI_5, arch="x86_64")
    monkeypatch.setenv("KOKORO_TVM_EXT_NO_VNNI", "1")  # one switch per precision on either architecture
    monkeypatch.setenv("KOKORO_TVM_EXT_NO_BF16", "1")
    assert [cpu_features.precision_here(p, have, arch="aarch64") for p in ("int8", "bf16")] == ["fp32"] * 2


def test_the_arm_notices_name_the_arm_feature(monkeypatch, caplog):
    from kokoro_tvm_ext.model.runtime import cpu_features

    monkeypatch.delenv("KOKORO_TVM_EXT_NO_VNNI", raising=False)
    monkeypatch.setattr(cpu_features, "_fallback_noticed", set())
    monkeypatch.setattr(cpu_features, "_int8_noticed", False)
    with caplog.at_level("WARNING", logger="kokoro_tvm_ext"):
        assert cpu_features.precision_here("int8", PI_4, arch="aarch64") == "fp32"
        cpu_features.notice_int8_fallback(PI_4, arch="aarch64")
        cpu_features.notice_int8_fallback(PI_5, arch="aarch64")  # native: nothing to say
    first, second = (r.getMessage() for r in caplog.records)
    assert "lacks dotprod (SDOT)" in first and "int8 runs as fp32" in first
    assert "lacks dotprod (SDOT)" in second and "dequantized weights" in second
    assert "AVX512" not in first + second


AUXV_PROGRAM = """#include <stdio.h>
#include <sys/auxv.h>
int main(void) { printf("%lx %lx\\n", getauxval(16), getauxval(26)); }
"""


@pytest.mark.system_tools
def test_the_decoded_bits_are_the_ones_an_emulated_arm_cpu_reports(tmp_path):
    """A C program built for aarch64 prints getauxval(AT_HWCAP) and (AT_HWCAP2) under qemu-user, as each CPU model."""
    import shutil
    import subprocess

    from system_tools import ARM64_LIBC, CROSS_COMPILER, require

    from kokoro_tvm_ext.model.runtime.cpu_features import aarch64_features

    require("qemu-aarch64", *CROSS_COMPILER, str(ARM64_LIBC))
    qemu, gcc = shutil.which("qemu-aarch64"), shutil.which("aarch64-linux-gnu-gcc")
    (tmp_path / "auxv.c").write_text(AUXV_PROGRAM)
    subprocess.run([gcc, "-O2", "-o", str(tmp_path / "auxv"), str(tmp_path / "auxv.c")], check=True)

    def reported(cpu: str) -> tuple[int, int]:
        # Without -L: the multiarch libc6:arm64 (the cross toolchain's own glibc hangs under qemu 7.2).
        env = {"QEMU_CPU": cpu, "PATH": "/usr/bin:/bin"}
        out = subprocess.run([qemu, str(tmp_path / "auxv")], env=env, capture_output=True, text=True, timeout=60)
        hwcap, hwcap2 = out.stdout.split()
        return int(hwcap, 16), int(hwcap2, 16)

    assert reported("cortex-a72") == (0x8FB, 0) and aarch64_features(*reported("cortex-a72")) == CORTEX_A72
    assert reported("cortex-a76") == (0x119FFB, 0) and aarch64_features(*reported("cortex-a76")) == CORTEX_A76
    no_sve = aarch64_features(*reported("max,sve=off"))
    assert {"i8mm", "bf16", "dotprod"} <= no_sve and not {"sve", "sve2"} & no_sve


def test_the_native_features_come_from_the_rust_precision_table():
    """One table (tvm-ext/src/precision/table.rs) says which sets each precision computes with, on every
    architecture: Python reads it, it does not keep a copy."""
    from kokoro_tvm_ext.model.runtime import cpu_features

    assert cpu_features.native_features("int8", "x86_64") == (("amx-int8", "avx512vnni"), "AVX512-VNNI")
    assert cpu_features.native_features("bf16", "x86_64") == (("amx-bf16", "avx512bf16"), "AVX512-BF16")
    assert cpu_features.native_features("int8", "aarch64") == (("i8mm", "dotprod"), "dotprod (SDOT)")
    assert cpu_features.native_features("bf16", "aarch64") == (("bf16",), "bf16 (BFDOT)")
    assert cpu_features.native_features("int8", "riscv64") == ((), "int8 instructions")
    assert cpu_features.hiding_variable("int8") == "KOKORO_TVM_EXT_NO_VNNI"
    assert cpu_features.hiding_variable("fp32") is None


def test_python_decides_as_the_rust_library_does_on_this_cpu():
    """From this CPU's features Python reaches the Rust library's own pick (which the kernels dispatch on), with the
    environment as it is (both read the same hiding variables)."""
    import tvm_ffi

    from kokoro_tvm_ext.model.runtime import cpu_features

    have = host_features()
    for precision in ("fp32", "bf16", "int8"):
        assert cpu_features.computes_natively(precision, have) == cpu_features.native_here(precision), precision
    for precision in ("bf16", "int8"):
        registered = bool(tvm_ffi.get_global_func(f"kokoro_tvm_ext.{precision}_native")())
        assert registered == cpu_features.native_here(precision)
