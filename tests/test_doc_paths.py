"""Every module and file the docs, comments and docstrings name exists: a pointer left behind by a move (a module
renamed, a file split) fails here, by the folder it was found in.

Checked without importing anything: a dotted ``kokoro_tvm_ext.x.y`` resolves to a module file (or the native
extension) and, past the module, to a name that module defines, imports or lists; a path with a slash and a source
ending (``python/kokoro_tvm_ext/serve/app.py``, ``tvm-ext/src/args.rs``, ``scripts/test.sh``) exists from the
repository's root, from the naming file's folder or one above it, or, written short (``serve/app.py``,
``gemm/bf16/weights.rs``), as the end of exactly the files of the repository that end so (at least one).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "python" / "kokoro_tvm_ext"

# Where pointers are looked for: the folder (or file) and which of its files; in code, comments and strings only.
ROOTS = {
    "docs": ("docs/*.md", "README.md"),
    "python": ("python/**/*.py",),
    "bench": ("bench/**/*.py",),
    "harness": ("harness/**/*.py",),
    "tests": ("tests/**/*.py",),
    "scripts": ("scripts/**/*.sh", "scripts/**/*.py"),
    "tvm-ext/src": ("tvm-ext/src/**/*.rs",),
}
DOTTED = re.compile(r"(?<![\w.])kokoro_tvm_ext(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])(?:[\w.-]+/)+[\w.-]+\.(?:py|rs|sh|md)(?![\w/])")
RELATIVE = re.compile(r":mod:`(\.+[A-Za-z_][\w.]*)`")  # Sphinx's relative module, as a package's docstring lists them
URL = re.compile(r"\w+://\S+")
# Paths of other projects, named as where an idea comes from (upstream TVM, PyTorch, hexgrad's kokoro, ...).
FOREIGN = ("tvm/", "python/tvm/", "src/relax/", "torch/", "kokoro/", "misaki/", "onnxruntime/", "site-packages/")
# Not paths of this repository, and why (kept tiny: each one is a real name that only looks like a stale path).
NOT_OURS = {"shared/NOTES.md": "the team's shared notes (/work/shared), beside the repository, not in it"}


def tracked(pattern: str) -> list[Path]:
    return sorted(p for p in REPO.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)


@cache
def repo_files() -> tuple[str, ...]:
    """Every file of the repository, git's view (tracked and untracked, not ignored)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(line for line in out.splitlines() if (REPO / line).exists())


def prose(path: Path) -> str:
    """What a file says to a reader: all of a document; a source file's comments and strings."""
    text = path.read_text(errors="replace")
    if path.suffix == ".py":
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (tokenize.TokenError, SyntaxError):
            return text
        return "\n".join(t.string for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING))
    if path.suffix == ".rs":
        return "\n".join(re.findall(r"//.*|\"(?:[^\"\\\n]|\\.)*\"", text))
    if path.suffix == ".sh":
        return "\n".join(line for line in text.splitlines())
    return text


@cache
def defined(module: Path) -> frozenset[str]:
    """The names ``module`` defines, imports or names in a string (``__all__``, a lazily loaded name's table)."""
    tree = ast.parse(module.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            names.add(node.value)
    return frozenset(names)


@cache
def registered() -> frozenset[str]:
    """The global functions the Rust library registers in TVM's registry (``kokoro_tvm_ext.conv1d``, ...)."""
    from kokoro_tvm_ext import _native

    return frozenset(_native.registered_functions())


@cache
def named_in_code() -> frozenset[str]:
    """Dotted names the package uses as values (an attribute key such as ``"kokoro_tvm_ext.precision"``)."""
    return frozenset(
        node.value
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value)
    )


def dotted_exists(name: str) -> bool:
    """``kokoro_tvm_ext.a.b.c``: a module, or a name defined in the deepest module it names; else a global
    function of the Rust library (or, ending in ``_``, the start of some: ``f"kokoro_tvm_ext.pack_{kind}"``), its
    namespace, or a name the package uses as a value."""
    functions = registered()
    if name in functions or name in named_in_code() or any(f.startswith(f"{name}.") for f in functions):
        return True
    if name.endswith("_") and any(f.startswith(name) for f in functions):
        return True
    parts = name.split(".")[1:]
    if parts[0].startswith("__") and parts[0].endswith("__"):  # a module's own attribute (__file__, __version__)
        return True
    where = PACKAGE
    for i, part in enumerate(parts):
        if (where / part / "__init__.py").is_file():
            where = where / part
        elif (where / f"{part}.py").is_file():
            module = where / f"{part}.py"
            return i + 1 == len(parts) or parts[i + 1] in defined(module)
        elif part == "_native" and where == PACKAGE:  # the compiled extension (src/, tvm-ext/)
            return True
        else:
            return part in defined(where / "__init__.py")
    return True


def path_exists(text: str, source: Path) -> bool:
    text = text.lstrip("./") if text.startswith("./") else text
    if text.startswith(FOREIGN) or text in NOT_OURS:
        return True
    for base in (REPO, *list(source.parents)[: len(source.relative_to(REPO).parts)]):
        if (base / text).exists():
            return True
    return any(f == text or f.endswith(f"/{text}") for f in repo_files())


def absolute(relative: str, source: Path) -> str:
    """``.x`` named in ``source`` (a module of the package) as ``kokoro_tvm_ext.package.x``."""
    package = source.parent.relative_to(PACKAGE.parent).parts
    up = len(relative) - len(relative.lstrip("."))
    return ".".join(package[: len(package) - up + 1]) + "." + relative.lstrip(".")


def stale_in(text: str, source: Path) -> list[str]:
    """The pointers of ``text`` (what ``source`` says) that lead nowhere."""
    text = URL.sub(" ", text)
    names = set(DOTTED.findall(text))
    if source.is_relative_to(PACKAGE):
        names |= {absolute(m, source) for m in RELATIVE.findall(text)}
    dotted = [m for m in sorted(names) if not dotted_exists(m)]
    return dotted + [m for m in sorted(set(PATH.findall(text))) if not path_exists(m, source)]


def stale(root: str) -> list[str]:
    return [
        f"{path.relative_to(REPO)}: {pointer}"
        for pattern in ROOTS[root]
        for path in tracked(pattern)
        if path != Path(__file__).resolve()
        for pointer in stale_in(prose(path), path)
    ]


@pytest.mark.parametrize("root", sorted(ROOTS))
def test_every_module_and_path_named_exists(root):
    assert stale(root) == []


def test_a_stale_pointer_is_found():
    """A module renamed under a docstring and a file moved under a comment are found; what exists is not."""
    source = REPO / "python" / "kokoro_tvm_ext" / "book" / "__init__.py"
    text = (
        "* :mod:`.ray_serve` the server, :mod:`.job` the job; see serve/app_old.py,\n"
        "python/kokoro_tvm_ext/serve/app.py, serve/app.py, tvm-ext/src/args.rs, ../serve/app.py and\n"
        "kokoro_tvm_ext.serve.server.no_such_name, but kokoro_tvm_ext.serve.server.server,\n"
        "kokoro_tvm_ext.speech.Speaker and https://x.org/kokoro_tvm_ext/gone.py"
    )
    assert absolute("..serve.app", source) == "kokoro_tvm_ext.serve.app"
    assert stale_in(text, source) == [
        "kokoro_tvm_ext.book.ray_serve",
        "kokoro_tvm_ext.serve.server.no_such_name",
        "serve/app_old.py",
    ]
