"""The kernel x instruction-set table of docs/architecture.md against the Rust code it describes.

Each row names its files (under tvm-ext/src; tests aside); each cell says whether the kernel has its own loop for
that set (✓), takes the `gemm-f32` crate's (gemm-f32) or has none (–). A set is the kernel's own where its files
select it, an `Isa::Avx2`/`Avx512`/`Neon` arm or an `is_*_feature_detected!` of the feature, and compile code for
it, a `#[target_feature(enable = ...)]` naming the feature. So adding a set to a kernel without its row, or a row
claiming one the code lacks, fails here; and every file with instruction-set code must belong to a row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "tvm-ext" / "src"
DOC = ROOT / "docs" / "architecture.md"
MARK = "<!-- kernel-isa-table"

# Column -> (what selects it in the code, the target feature that compiles for it).
SELECTORS = {
    "AVX2": (r"Isa::Avx2\b", "avx2"),
    "AVX-512": (r"Isa::Avx512\b", "avx512f"),
    "NEON": (r"Isa::Neon\b", "neon"),
    "AVX512-VNNI": (r'is_x86_feature_detected!\("avx512vnni"\)', "avx512vnni"),
    "AVX512-BF16": (r'is_x86_feature_detected!\("avx512bf16"\)', "avx512bf16"),
    "dotprod": (r'is_aarch64_feature_detected!\("dotprod"\)', "dotprod"),
    "i8mm": (r'is_aarch64_feature_detected!\("i8mm"\)', "i8mm"),
    "ARM bf16": (r'is_aarch64_feature_detected!\("bf16"\)', "bf16"),
}
CRATE_COLUMNS = ("AVX2", "AVX-512", "NEON")  # the sets gemm-f32 has kernels for
CALLS_THE_F32_GEMM = re.compile(r"\bsgemm(?:_shared)?\(|gemm_f32::")
# Instruction-set code shared by several rows' kernels, not a kernel of its own: the detection of `Isa`, the
# AVX-512 store both packed GEMMs end their packing with.
SHARED = {"isa.rs", "gemm/packed.rs"}


def table(text: str) -> list[dict[str, str]]:
    """The rows of the table after MARK, as {column: cell}."""
    lines = text[text.index(MARK) :].splitlines()[1:]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def sources(code: str) -> list[Path]:
    """The non-test Rust files of a row's Code cell (backticked paths under tvm-ext/src, files or folders)."""
    files = []
    for path in re.findall(r"`([^`]+)`", code):
        where = SRC / path
        assert where.exists(), f"{path} is not under tvm-ext/src"
        files += [where] if where.is_file() else sorted(where.rglob("*.rs"))
    return [f for f in files if f.name not in ("tests.rs", "testing.rs") and "tests" not in f.relative_to(SRC).parts]


def enabled_features(text: str) -> set[str]:
    """Every feature named by a `#[target_feature(enable = "a,b")]`."""
    found = re.findall(r'target_feature\(enable\s*=\s*"([^"]*)"\)', text)
    return {f.strip() for group in found for f in group.split(",")}


def problems(rows: list[dict[str, str]]) -> list[str]:
    out = []
    for row in rows:
        name, files = row["Kernel"], sources(row["Code"])
        text = "\n".join(f.read_text() for f in files)
        features = enabled_features(text)
        portable = re.search(r"Isa::Portable|fn \w*portable", text)
        if row["portable"] != "✓" or (re.search(r"Isa::\w+", text) and not portable):
            out.append(
                f"{name}: every kernel has a portable path (Isa::Portable or a *_portable loop where it picks a set)"
            )
        for column, (selector, feature) in SELECTORS.items():
            cell, selected = row[column], bool(re.search(selector, text))
            crate = column in CRATE_COLUMNS and bool(CALLS_THE_F32_GEMM.search(text))
            if cell == "✓":
                ok = selected and feature in features
            elif cell == "gemm-f32":
                ok = not selected and crate
            elif cell == "–":
                ok = not selected and not crate
            else:
                ok = False
            if not ok:
                out.append(
                    f"{name} / {column}: the table says {cell!r}; the code selects it: {selected}, compiles for "
                    f"{feature}: {feature in features}, calls the f32 GEMM: {crate}"
                )
    return out


def test_the_table_matches_the_code():
    rows = table(DOC.read_text())
    assert len(rows) >= 13 and set(rows[0]) == {"Kernel", "Code", "portable", *SELECTORS}
    assert problems(rows) == []


def test_every_file_with_instruction_set_code_is_in_a_row():
    covered = {f for row in table(DOC.read_text()) for f in sources(row["Code"])}
    selecting = re.compile(r"target_feature\(enable|_feature_detected!")
    stray = [
        f.relative_to(SRC).as_posix()
        for f in sorted(SRC.rglob("*.rs"))
        if f.name not in ("tests.rs", "testing.rs")
        and "tests" not in f.relative_to(SRC).parts
        and f.relative_to(SRC).as_posix() not in SHARED
        and selecting.search(f.read_text())
        and f not in covered
    ]
    assert stray == [], "instruction-set code outside the table's rows (docs/architecture.md)"


def test_a_wrong_cell_is_caught():
    """The check itself: the int8 GEMM claimed for AVX2, and its dotprod cell taken away, are both reported."""
    rows = table(DOC.read_text())
    int8 = next(r for r in rows if r["Kernel"] == "int8 GEMM")
    wrong = [*[r for r in rows if r is not int8], {**int8, "AVX2": "✓", "dotprod": "–"}]
    found = problems(wrong)
    assert len(found) == 2 and found[0].startswith("int8 GEMM / AVX2") and found[1].startswith("int8 GEMM / dotprod")
