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
