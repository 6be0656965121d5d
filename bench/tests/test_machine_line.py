"""The bench tables' header: the CPU, its family/model and ISA flags, read from /proc/cpuinfo text; on aarch64 the
cores named from their implementer and part numbers, the features from that text or from AT_HWCAP."""

import os

import pytest
from kokoro_bench.table import cpu_facts, machine_line

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)

# Trimmed /proc/cpuinfo texts of three machines the project ran on (two processors each: the first one counts).
CASCADE_LAKE = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Processor @ 2.50GHz
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni

processor\t: 1
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Processor @ 2.50GHz
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_vnni
"""
ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 avx avx2 fma vaes
"""
SAPPHIRE_RAPIDS = """processor\t: 0
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: avx2 avx512f avx512_vnni avx_vnni avx512_bf16 amx_bf16 amx_tile amx_int8 avx512_fp16
"""


def test_flags_and_model_of_an_avx512_vnni_xeon():
    facts = cpu_facts(CASCADE_LAKE)
    assert (facts["name"], facts["family"], facts["model"]) == ("Intel(R) Xeon(R) Processor @ 2.50GHz", "6", "85")
    assert facts["flags"] == ["avx2", "avx512f", "avx512_vnni"]
    assert facts["absent"] == ["avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"]


def test_every_flag_of_an_amx_xeon_in_a_fixed_order():
    facts = cpu_facts(SAPPHIRE_RAPIDS)
    assert facts["flags"] == ["avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16"] + [
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    ]
    assert facts["absent"] == []


def test_the_header_line_names_cpu_flags_and_both_thread_counts():
    line = machine_line([2, 1], ZEN3)
    assert line.startswith("machine: AMD EPYC 7B13 (family 25 model 1); flags: avx2 (no avx512f avx512_vnni ")
    assert f"; {os.cpu_count()} cores visible, 1 and 2 threads used; python " in line
    assert "avx512_vnni" not in cpu_facts(ZEN3)["flags"]


def test_the_header_line_without_cpuinfo_still_says_what_it_knows():
    line = machine_line(1, "")
    assert "flags: none of avx2 avx512f" in line and "1 thread used" in line
    assert "family" not in line


def _arm_processor(n: int, part: str, features: str, variant: str = "0x4") -> str:
    return (
        f"processor\t: {n}\nBogoMIPS\t: 108.00\nFeatures\t: {features}\nCPU implementer\t: 0x41\n"
        f"CPU architecture: 8\nCPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: 1\n"
    )


# Raspberry Pi OS (kernel 6.6) on a Pi 5: four Cortex-A76, no "model name", the board in a trailing "Model" line.
PI5_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
PI5 = "\n".join(_arm_processor(n, "0xd0b", PI5_FEATURES) for n in range(4)) + (
    "\nRevision\t: d04170\nSerial\t\t: 5d3b8fb6c1f2a9e0\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n"
)
# Amazon Linux 2023 on a c7g (Graviton 3, Neoverse V1): SVE but no SVE2; "svei8mm" and "svebf16" are not i8mm/bf16.
GRAVITON3_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 "
    "sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 "
    "dgh rng"
)
GRAVITON3 = "\n".join(_arm_processor(n, "0xd40", GRAVITON3_FEATURES, variant="0x1") for n in range(2))
# An RK3588 board (Orange Pi 5): four Cortex-A55 and four Cortex-A76.
RK3588 = "\n".join(_arm_processor(n, "0xd05" if n < 4 else "0xd0b", PI5_FEATURES) for n in range(8))


def test_a_raspberry_pi_5_is_named_with_its_board_and_has_dotprod_but_no_i8mm():
    facts = cpu_facts(PI5)
    assert facts["arch"] == "aarch64"
    assert facts["name"] == "ARM Cortex-A76 (Pi 5 class), Raspberry Pi 5 Model B Rev 1.0"
    assert (facts["flags"], facts["absent"]) == (["asimd", "asimdhp", "asimddp"], ["i8mm", "bf16", "sve", "sve2"])
    line = machine_line(4, PI5)
    assert line.startswith(
        "machine: ARM Cortex-A76 (Pi 5 class), Raspberry Pi 5 Model B Rev 1.0; "
        "features: asimd asimdhp asimddp (no i8mm bf16 sve sve2); "
    )
    assert "family" not in line and "avx" not in line and "4 threads used" in line


def test_a_graviton_3_has_i8mm_bf16_and_sve_but_no_sve2():
    facts = cpu_facts(GRAVITON3)
    assert facts["name"] == "ARM Neoverse V1 (Graviton 3 class)"
    assert facts["flags"] == ["asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve"]
    assert facts["absent"] == ["sve2"]
    assert machine_line(2, GRAVITON3).startswith(
        "machine: ARM Neoverse V1 (Graviton 3 class); features: asimd asimdhp asimddp i8mm bf16 sve (no sve2); "
    )


def test_a_big_little_board_counts_each_kind_of_core():
    assert cpu_facts(RK3588)["name"] == "4x ARM Cortex-A55 + 4x ARM Cortex-A76 (Pi 5 class)"


def test_an_unlisted_core_keeps_its_numbers():
    text = _arm_processor(0, "0xd4b", "fp asimd").replace("0x41", "0x61")
    assert cpu_facts(text)["name"] == "Apple part 0xd4b"


def test_the_x86_text_is_unchanged_by_the_arm_reading():
    assert cpu_facts(ZEN3)["arch"] == "x86_64" and cpu_facts(ZEN3)["name"] == "AMD EPYC 7B13"


def test_hwcaps_say_the_features_where_the_text_names_no_core():
    # qemu-user's cortex-a76 (AT_HWCAP 0x119ffb): its /proc/cpuinfo is the x86 host's, which the header drops.
    line = machine_line(2, "", hwcaps=(0x119FFB, 0))
    assert line.startswith(
        "machine: aarch64, a CPU /proc/cpuinfo does not name (emulated?); "
        "features: asimd asimdhp asimddp (no i8mm bf16 sve sve2); "
    )
    # given, they win over the text's Features line: what this process may run
    assert cpu_facts(GRAVITON3, hwcaps=(0x8FB, 0))["flags"] == ["asimd"]  # cortex-a72's
