"""The two tables of docs/architecture.md against the Rust code they describe.

The kernel x instruction-set table: each row names its files (under tvm-ext/src; tests aside); each cell says
whether the kernel has its own loop for that set (✓), takes the `gemm-f32` crate's (gemm-f32) or has none (–). A
set is the kernel's own where its files select it, an `Isa::Avx2`/`Avx512`/`Neon` arm or an arm of a dot-product
set's own (`Isa::Avx512Vnni`, ...; not one an f32 kernel shares with the vector set it extends), and compile code
for it, a `#[target_feature(enable = ...)]` naming the feature. So adding a set to a kernel without its row, or a
row claiming one the code lacks, fails here; and every file with instruction-set code must belong to a row.

One layout for that code: `#[target_feature]` only in a kernel folder's `x86.rs` and `arm.rs`, the CPU asked only
in `isa.rs`; a row's files are its folders, so a folder's `x86.rs` and `arm.rs` are its row's.

The precision x instruction-set table: the same rows as `TABLE` in tvm-ext/src/precision/table.rs, and each
micro-kernel it names a function in that file, compiled for the row's set.
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
    # An arm of their own: not after "| ", as in an f32 kernel's `Isa::Avx512 | Isa::Avx512Vnni | ...`.
    "AVX512-VNNI": (r"(?<!\| )Isa::Avx512Vnni\b", "avx512vnni"),
    "AVX512-BF16": (r"(?<!\| )Isa::Avx512Bf16\b", "avx512bf16"),
    "dotprod": (r"(?<!\| )Isa::Dotprod\b", "dotprod"),
    "i8mm": (r"(?<!\| )Isa::I8mm\b", "i8mm"),
    "ARM bf16": (r"(?<!\| )Isa::NeonBf16\b", "bf16"),
    "AMX": (r"(?<!\| )Isa::Amx(?:Int8|Bf16)\b", "amx"),
}
# Sets written as inline assembly (Rust's AMX intrinsics and target features are unstable): compiled for where
# an `asm!` in the row's files holds one of the set's instructions.
ASM_SETS = {
    "amx": r'"tdp(?:bsud|busd|bf16ps) tmm',
    "amx-int8": r'"tdpb(?:sud|usd) tmm',
    "amx-bf16": r'"tdpbf16ps tmm',
}
CRATE_COLUMNS = ("AVX2", "AVX-512", "NEON")  # the sets gemm-f32 has kernels for
CALLS_THE_F32_GEMM = re.compile(r"\bsgemm(?:_shared)?\(|gemm_f32::")
# Instruction-set code shared by several rows' kernels, not a kernel of its own: the detection of `Isa`, the
# AVX-512 store both packed GEMMs end their packing with.
SHARED = {"isa.rs", "gemm/x86.rs"}
# The files that may hold a kernel folder's code per instruction set.
ISA_FILES = {"x86.rs", "arm.rs"}
PRECISION_MARK = "<!-- precision-isa-table"
PRECISION_TABLE = SRC / "precision" / "table.rs"


def table(text: str, mark: str = MARK) -> list[dict[str, str]]:
    """The rows of the table after ``mark``, as {column: cell}."""
    lines = text[text.index(mark) :].splitlines()[1:]
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
    """Every feature named by a `#[target_feature(enable = "a,b")]`, and each set of ``ASM_SETS`` whose
    instructions an `asm!` string holds."""
    found = re.findall(r'target_feature\(enable\s*=\s*"([^"]*)"\)', text)
    asm = {name for name, instruction in ASM_SETS.items() if re.search(instruction, text)}
    return {f.strip() for group in found for f in group.split(",")} | asm


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


def rust_files() -> list[Path]:
    return [
        f
        for f in sorted(SRC.rglob("*.rs"))
        if f.name not in ("tests.rs", "testing.rs") and "tests" not in f.relative_to(SRC).parts
    ]


def layout_problems(files: dict[str, str]) -> list[str]:
    """Instruction-set code outside the one layout, for {path under tvm-ext/src: text}."""
    out = []
    for path, text in files.items():
        name = path.rsplit("/", 1)[-1]
        if "target_feature(enable" in text and name not in ISA_FILES:
            out.append(f"{path}: #[target_feature] outside a folder's x86.rs / arm.rs")
        if "_feature_detected!" in text and path != "isa.rs":
            out.append(f"{path}: asks the CPU; only isa.rs does")
        if re.search(r"^\s*(pub(\([\w:]+\))? )?mod (x86|neon|arm|avx\w*) \{", text, re.M) and name not in ISA_FILES:
            out.append(f"{path}: an inline module of instruction-set code")
    return out


def test_instruction_set_code_has_one_layout():
    files = {f.relative_to(SRC).as_posix(): f.read_text() for f in rust_files()}
    assert layout_problems(files) == []
    # The check itself: a loop compiled for AVX2 in a kernel's mod.rs, and detection outside isa.rs, are found.
    planted = {
        "softmax/mod.rs": '#[target_feature(enable = "avx2")]\nunsafe fn f() {}',
        "gemm/int8/mod.rs": 'is_x86_feature_detected!("avx512vnni")',
        "conv/winograd/kernel.rs": "mod x86 {\n}",
    }
    assert len(layout_problems(planted)) == 3


def rust_precision_table() -> list[dict[str, str]]:
    """`TABLE` of tvm-ext/src/precision/table.rs: its `MicroKernel { field: "value", ... }` rows, constants resolved."""
    text = PRECISION_TABLE.read_text()
    consts = dict(re.findall(r'const (\w+): &str = "([^"]*)";', text))
    body = text[text.index("pub const TABLE") :]
    rows = []
    for block in re.findall(r"MicroKernel \{(.*?)\}", body, re.S):
        fields = re.findall(r'(\w+): ("[^"]*"|\w+),', block)
        rows.append({k: v.strip('"') if v.startswith('"') else consts[v] for k, v in fields})
    return rows


DOC_COLUMNS = {
    "Precision": "precision",
    "Arch": "arch",
    "Set": "isa",
    "Name": "name",
    "Micro-kernel": "kernel",
    "Tile": "tile",
    "Packing": "packing",
}


def precision_problems(doc_rows: list[dict[str, str]], code_rows: list[dict[str, str]]) -> list[str]:
    out = []
    doc = [{field: row[column] for column, field in DOC_COLUMNS.items()} for row in doc_rows]
    if doc != code_rows:
        out.append(f"docs/architecture.md's precision table differs from precision/table.rs: {doc} != {code_rows}")
    for row in code_rows:
        path, _, rest = row["kernel"].partition(" ")
        if not path.endswith(".rs"):
            continue  # the gemm-f32 crate's
        where = SRC / path
        function = rest.split()[0] if rest else ""
        text = where.read_text() if where.exists() else ""
        if not re.search(rf"fn {re.escape(function)}\b", text):
            out.append(f"{row['precision']} / {row['isa']}: no fn {function} in {path}")
        if row["isa"] != "portable" and row["isa"] not in enabled_features(text):
            out.append(f"{row['precision']} / {row['isa']}: {path} compiles nothing for {row['isa']}")
    return out


def test_the_precision_table_in_the_docs_is_the_one_in_the_code():
    code_rows = rust_precision_table()
    assert {r["precision"] for r in code_rows} == {"f32", "bf16", "int8"}
    assert all(set(r) == set(DOC_COLUMNS.values()) for r in code_rows)
    doc_rows = table(DOC.read_text(), PRECISION_MARK)
    assert precision_problems(doc_rows, code_rows) == []
    # The check itself: a micro-kernel renamed in the docs, and one pointed at a file without it, are both found.
    wrong_doc = [dict(r) for r in doc_rows]
    wrong_doc[1]["Micro-kernel"] = "gemm/bf16/x86.rs tile_fp16"
    wrong_code = [
        {**r, "kernel": "gemm/bf16/arm.rs tile_vnni (VPDPBUSD)"} if r["isa"] == "avx512vnni" else r for r in code_rows
    ]
    assert len(precision_problems(wrong_doc, code_rows)) == 1
    found = precision_problems(table(DOC.read_text(), PRECISION_MARK), wrong_code)
    assert any("no fn tile_vnni" in p for p in found) and any("compiles nothing for avx512vnni" in p for p in found)
