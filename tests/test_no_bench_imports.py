"""The tests and the shared harness never import the benchmarks (bench/kokoro_bench).

A test that imports the bench ties the suite to benchmark code that changes with what it measures; what both
need (a loopback Ray cluster, the recognizer, audio distances, a server's health) is in harness/kokoro_harness.
The bench's own tests live beside it (bench/tests). Checked over every import (function bodies too), every
``import_module``/``__import__`` of a literal name, and every string of code run in a child process.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_PACKAGE = "kokoro_bench"
CODE_IMPORT = re.compile(rf"\b(?:from|import)\s+{BENCH_PACKAGE}\b")


def bench_imports(source: str) -> list[int]:
    """The lines of ``source`` that import the bench package."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []
        elif isinstance(node, ast.Call) and _called_name(node.func) in ("import_module", "__import__") and node.args:
            first = node.args[0]
            names = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [BENCH_PACKAGE] if CODE_IMPORT.search(node.value) else []  # python -c "from kokoro_bench ..."
        else:
            continue
        if any(name.split(".")[0] == BENCH_PACKAGE for name in names):
            lines.append(node.lineno)
    return sorted(set(lines))


def _called_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


# Written with the name spliced in, so that this file's own strings are not imports of the bench.
CAUGHT = {
    f"import {BENCH_PACKAGE}\n": [1],
    f"import os, {BENCH_PACKAGE}.e2e as e2e\n": [1],
    f"from {BENCH_PACKAGE}.fidelity import log_mel_l1\n": [1],
    f"def test():\n    from {BENCH_PACKAGE} import peers\n": [2],
    f"import importlib\nmodule = importlib.import_module('{BENCH_PACKAGE}.workers')\n": [2],
    f"CHILD = 'import sys\\nfrom {BENCH_PACKAGE}.workers import peak_rss_mb\\n'\n": [1],
}
LEFT_ALONE = (
    "from kokoro_harness.fidelity import log_mel_l1\n",
    f"from .{BENCH_PACKAGE} import x\n",  # relative: a module of the test's own package
    f"# see bench/{BENCH_PACKAGE}/e2e.py\nNOTE = 'bench/{BENCH_PACKAGE}/e2e.py measures it'\n",
)


@pytest.mark.parametrize("source", CAUGHT)
def test_every_way_of_importing_the_bench_is_caught(source):
    assert bench_imports(source) == CAUGHT[source]


@pytest.mark.parametrize("source", LEFT_ALONE)
def test_names_and_paths_that_only_mention_the_bench_are_not_imports(source):
    assert bench_imports(source) == []


def test_no_test_or_harness_file_imports_the_bench():
    files = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "harness").rglob("*.py"))
    assert len(files) > 100  # the scan sees the suite
    found = {
        f"{path.relative_to(ROOT)}:{line}": path.read_text().splitlines()[line - 1].strip()
        for path in files
        for line in bench_imports(path.read_text())
    }
    assert not found, f"import these from harness/kokoro_harness, or move the test to bench/tests: {found}"
