"""The bench tables' header: the CPU, its family/model and ISA flags, read from /proc/cpuinfo text."""

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
