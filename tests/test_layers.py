"""The package's shape: layers import one way (import-linter's contracts in pyproject.toml, over every import,
function bodies included), and a compiled artifact's key follows every file of the plugin and model layers
but the weights package (model/weights/, whose output the weights' own fingerprint keys)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kokoro_tvm_ext
from kokoro_tvm_ext.model.artifact_cache import COMPILER_LAYERS, compiler_files, compiler_fingerprint

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(kokoro_tvm_ext.__file__).resolve().parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(python_path: Path, config: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("importlinter")
    env = {"PYTHONPATH": str(python_path), "PATH": str(Path(sys.executable).parent)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"], env=env, capture_output=True, text=True
    )


def test_every_layer_imports_only_the_layers_below_it():
    result = lint_imports(PACKAGE.parent, REPO / "pyproject.toml")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "3 kept, 0 broken" in result.stdout


def copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "python" / "kokoro_tvm_ext"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize(
    "module, upward",
    [
        ("model/spec.py", "from kokoro_tvm_ext.speech import Speaker"),
        ("plugin/kernels.py", "from kokoro_tvm_ext.model.runtime import KokoroTVM"),
        ("speech/chunks.py", "from kokoro_tvm_ext.cli import main"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, upward):
    """On a copy: one import from a higher layer, even inside a function, fails the check."""
    copy = copy_package(tmp_path)
    path = copy / module
    path.write_text(path.read_text() + f"\n\ndef _upward():\n    {upward}\n")
    result = lint_imports(copy.parent, REPO / "pyproject.toml")
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout[-2000:]


def test_the_fingerprint_changes_with_every_plugin_and_model_file_but_the_weights_and_the_encoder(tmp_path):
    copy = copy_package(tmp_path)
    files = compiler_files(copy)
    assert {f.relative_to(copy).parts[0] for f in files} == set(COMPILER_LAYERS)
    assert any(f.name == "kernels.py" for f in files) and any(f.suffix == ".json" for f in files)
    weights = copy / "model" / "weights"
    encoder = copy / "model" / "speaker_encoder"  # another model, keyed by its own artifact
    assert not any(f.is_relative_to(weights) or f.is_relative_to(encoder) for f in files)
    everything = [f for layer in COMPILER_LAYERS for f in (copy / layer).rglob("*") if f.is_file()]
    left_out = [f for folder in (weights, encoder) for f in folder.rglob("*") if f.is_file()]
    assert set(everything) - set(files) == set(left_out)
    base = compiler_fingerprint(copy)
    for f in files:
        original = f.read_bytes()
        f.write_bytes(original + b"\n")
        assert compiler_fingerprint(copy) != base, f"editing {f.relative_to(copy)} kept the fingerprint"
        f.write_bytes(original)
    assert compiler_fingerprint(copy) == base
    new = copy / "plugin" / "passes" / "new_pass.py"  # a file nobody listed
    new.write_text("X = 1\n")
    assert compiler_fingerprint(copy) != base
    new.unlink()
    speech = copy / "speech" / "chunks.py"  # the speech layer never changes compiled code
    speech.write_text(speech.read_text() + "\n")
    # Nor do the weights' reading and rebuilding: the weights' own fingerprint covers what they make.
    for edited in (weights / "rebuild.py", weights / "data" / "kmodel-82m-layout.json"):
        edited.write_bytes(edited.read_bytes() + b"\n")
    (weights / "new_source.py").write_text("X = 1\n")
    (encoder / "network.py").write_text((encoder / "network.py").read_text() + "\n")
    assert compiler_fingerprint(copy) == base
