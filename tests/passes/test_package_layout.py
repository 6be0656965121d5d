"""The passes' layout rules: shared helpers come from _relax_utils, never from a sibling pass, and the
frontend does not depend on the passes."""

from __future__ import annotations

import ast
from pathlib import Path

import kokoro_tvm_ext

PACKAGE = Path(kokoro_tvm_ext.__file__).parent
ORDERS_THE_PASSES = {"__init__.py", "pipeline.py"}


def _relative_imports(path: Path) -> list[str]:
    """``from .x import`` / ``from ..x import`` targets in ``path``, as written (".x", "..x")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append("." * node.level + (node.module or ""))
    return found


def test_no_pass_imports_a_sibling_pass():
    passes = sorted((PACKAGE / "passes").glob("*.py"))
    assert len(passes) > 5
    for path in passes:
        if path.name in ORDERS_THE_PASSES:
            continue
        siblings = [m for m in _relative_imports(path) if m.startswith(".") and not m.startswith("..")]
        assert set(siblings) <= {"._relax_utils"}, (path.name, siblings)


def test_the_frontend_imports_nothing_from_the_passes():
    for path in sorted((PACKAGE / "frontend").glob("*.py")):
        assert not [m for m in _relative_imports(path) if m.startswith("..passes")], path.name
