"""The release wheel installs into a bare virtualenv and works without LD_LIBRARY_PATH."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kokoro_tvm_ext._versions import EXPECTED

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ)
    # tvm-ffi-config lives next to this interpreter.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
    _run([sys.executable, "-m", "maturin", "build", "--release", "--out", str(out)], cwd=ROOT, env=env)
    (built,) = out.glob("*.whl")
    return built


def test_wheel_is_abi3_and_carries_no_tvm_ffi_copy(wheel):
    assert "-abi3-" in wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("kokoro_tvm_ext/_native") for n in names)
    assert not [n for n in names if "libtvm_ffi" in n], "a second libtvm_ffi would be a second registry"


def test_wheel_works_in_a_fresh_venv_with_only_tvm_and_numpy(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    py = venv / "bin" / "python"
    pins = [f"{dist}=={ver}" for dist, ver in EXPECTED.items()]
    _run([str(py), "-m", "pip", "install", "-q", *pins, "numpy"])
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    check = """
import numpy as np, tvm, kokoro_tvm_ext
assert "kokoro_tvm_ext.snake" in kokoro_tvm_ext.registered_functions()
f = tvm.get_global_func("kokoro_tvm_ext.snake")
x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 2, 6)
a = np.array([0.5, 2.0], np.float32).reshape(1, 2, 1)
out = tvm.runtime.tensor(np.zeros_like(x))
f(tvm.runtime.tensor(x), tvm.runtime.tensor(a), out)
want = x + np.sin(a * x) ** 2 / a
assert np.allclose(out.numpy(), want, atol=1e-5), (out.numpy(), want)
print("WHEEL-OK", kokoro_tvm_ext.__file__)
"""
    result = _run([str(py), "-c", check], env=env, cwd=tmp_path)
    assert "WHEEL-OK" in result.stdout
    assert str(venv) in result.stdout  # the installed copy, not the source tree
