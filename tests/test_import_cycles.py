"""No import cycle in the package, imports inside functions included: a cycle hides an order in which a module
finds the other half-initialized, and makes two modules one. Checked with grimp (import-linter's graph).

grimp reads only Python files, so it folds the native extension ``kokoro_tvm_ext._native`` into the root package;
an import of it is not an import of the root's lazily loaded names, and is taken apart here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kokoro_tvm_ext

pytestmark = pytest.mark.unit

PACKAGE = Path(kokoro_tvm_ext.__file__).resolve().parent

# Prints the imports that lie on a cycle, as JSON pairs.
FIND_CYCLES = """
import json, grimp
graph = grimp.build_graph("kokoro_tvm_ext")
root = "kokoro_tvm_ext"
for importer in list(graph.find_modules_that_directly_import(root)):
    details = graph.get_import_details(importer=importer, imported=root)
    if all("_native" in d["line_contents"] for d in details):
        graph.remove_import(importer=importer, imported=root)
print(json.dumps([
    (a, b)
    for a in sorted(graph.modules)
    for b in sorted(graph.find_modules_directly_imported_by(a))
    if a != b and graph.chain_exists(importer=b, imported=a)
]))
"""


def imports_on_a_cycle(python_path: Path) -> list[list[str]]:
    pytest.importorskip("grimp")
    env = {"PYTHONPATH": str(python_path), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run([sys.executable, "-c", FIND_CYCLES], env=env, capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_the_package_has_no_import_cycle():
    assert imports_on_a_cycle(PACKAGE.parent) == []


def test_an_import_inside_a_function_that_closes_a_circle_is_found(tmp_path):
    """On a copy: the LSTM op's arguments reading the op's registration (the circle there was) is a cycle."""
    copy = tmp_path / "python" / "kokoro_tvm_ext"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    call = copy / "plugin" / "lstm_call.py"
    call.write_text(
        call.read_text() + "\n\ndef _op():\n    from kokoro_tvm_ext.plugin.legalize.switch import lstm_op\n"
    )
    found = {tuple(pair) for pair in imports_on_a_cycle(copy.parent)}
    assert found == {
        ("kokoro_tvm_ext.plugin.lstm_call", "kokoro_tvm_ext.plugin.legalize.switch"),
        ("kokoro_tvm_ext.plugin.legalize.switch", "kokoro_tvm_ext.plugin.lstm_call"),
        ("kokoro_tvm_ext.plugin.legalize.switch", "kokoro_tvm_ext.plugin.legalize.lstm_tir"),
        ("kokoro_tvm_ext.plugin.legalize.lstm_tir", "kokoro_tvm_ext.plugin.lstm_call"),
    }


REPO = PACKAGE.parents[1]
HELPERS = {"kokoro_bench": REPO / "bench", "kokoro_harness": REPO / "harness"}  # packages outside the wheel


def helper_cycles(package: str, python_path: Path) -> list[list[str]]:
    """The imports on a cycle in ``package`` (one of HELPERS, found on ``python_path``), as JSON pairs."""
    pytest.importorskip("grimp")
    find = f"""
import json, grimp
graph = grimp.build_graph({package!r})
print(json.dumps([
    (a, b)
    for a in sorted(graph.modules)
    for b in sorted(graph.find_modules_directly_imported_by(a))
    if a != b and graph.chain_exists(importer=b, imported=a)
]))
"""
    env = {"PYTHONPATH": str(python_path), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run([sys.executable, "-c", find], env=env, capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize("package", sorted(HELPERS))
def test_the_bench_and_harness_packages_have_no_import_cycle(package):
    assert helper_cycles(package, HELPERS[package]) == []


def test_a_circle_in_the_bench_is_found(tmp_path):
    """On a copy: the end-to-end bench and its peers in virtualenvs importing each other (the circle there was)."""
    shutil.copytree(HELPERS["kokoro_bench"] / "kokoro_bench", tmp_path / "kokoro_bench")
    peers = tmp_path / "kokoro_bench" / "venv_peers.py"
    bench = "kokoro_bench"  # spelled apart: tests/test_no_bench_imports.py reads this file's lines as source
    peers.write_text(peers.read_text() + f"\n\ndef _rows():\n    from {bench} import e2e\n")
    found = {tuple(pair) for pair in helper_cycles("kokoro_bench", tmp_path)}
    assert ("kokoro_bench.venv_peers", "kokoro_bench.e2e") in found
