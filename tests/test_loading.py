"""Loading the plugin: one registry, version pins, clear errors instead of crashes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import tvm

import kokoro_tvm_ext
from kokoro_tvm_ext.support import versions as _versions


def run_python(code: str, env_extra: dict | None = None, pythonpath: str | None = None):
    import os

    env = dict(os.environ)
    env.update(env_extra or {})
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=120
    )


def test_registered_functions_are_in_tvms_registry():
    names = kokoro_tvm_ext.registered_functions()
    assert "kokoro_tvm_ext.snake" in names
    for name in names:
        assert name.startswith("kokoro_tvm_ext.")
        assert tvm.get_global_func(name) is not None
    assert kokoro_tvm_ext.__version__ == "0.1.0"


def test_importing_and_registering_twice_is_harmless():
    import importlib

    importlib.reload(kokoro_tvm_ext)
    kokoro_tvm_ext._native.register_all()
    assert kokoro_tvm_ext.registered_functions().count("kokoro_tvm_ext.snake") == 1


def test_version_problems_name_expected_and_found():
    ok = dict(_versions.EXPECTED)
    assert _versions.version_problems(ok) == []
    problems = _versions.version_problems({**ok, "apache-tvm": "0.26.0", "apache-tvm-ffi": None})
    assert problems == [
        "apache-tvm 0.26.0 is installed, but kokoro-tvm-ext needs apache-tvm==0.27.0.post1",
        "apache-tvm-ffi is not installed (expected 0.1.15.post2)",
    ]


def test_wrong_installed_tvm_version_is_an_import_error(tmp_path):
    # A distribution earlier on sys.path wins importlib.metadata's lookup.
    info = tmp_path / "apache_tvm-0.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: apache-tvm\nVersion: 0.26.0\n")
    result = run_python(
        """
        try:
            import kokoro_tvm_ext
        except ImportError as e:
            print("IMPORT-ERROR:", e)
        """,
        pythonpath=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORT-ERROR:" in result.stdout
    assert "apache-tvm 0.26.0 is installed" in result.stdout
    assert "apache-tvm==0.27.0.post1" in result.stdout


def test_native_without_tvm_ffi_is_a_clear_import_error():
    result = run_python(
        """
        import sys
        sys.modules["tvm_ffi"] = None  # makes `import tvm_ffi` fail as if uninstalled
        try:
            import kokoro_tvm_ext._native
        except ImportError as e:
            print("IMPORT-ERROR:", e)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORT-ERROR: kokoro_tvm_ext needs the TVM FFI runtime" in result.stdout
    assert "pip install apache-tvm-ffi==0.1.15.post2" in result.stdout


def test_plugin_functions_reach_the_vm_only_through_the_shared_registry():
    """A second process that never imports the plugin does not see our names."""
    result = run_python(
        """
        import tvm_ffi
        print(tvm_ffi.get_global_func("kokoro_tvm_ext.snake", allow_missing=True))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "None"


IDLE_CPU_AFTER_PARALLEL_LOOP = """
import os, resource, time
import numpy as np
import kokoro_tvm_ext, tvm
from tvm.script import tirx as T

@T.prim_func
def double(a: T.Buffer((4096,), "float32"), b: T.Buffer((4096,), "float32")):
    for i in T.parallel(4096):
        b[i] = a[i] * T.float32(2)

f = tvm.compile(double, target={"kind": "llvm"})
a = tvm.runtime.tensor(np.ones(4096, np.float32))
b = tvm.runtime.tensor(np.zeros(4096, np.float32))
f(a, b)
assert (b.numpy() == 2).all()
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
start = cpu()
f(a, b)
time.sleep(0.5)
print(os.environ.get("TVM_THREAD_POOL_SPIN_COUNT", "unset"), cpu() - start)
"""


def test_tvm_pool_workers_sleep_instead_of_spinning(tmp_path):
    # Stock TVM's idle workers spin ~0.07 s of CPU after every parallel loop,
    # time our kernels' threads need; the plugin turns that off by default.
    import os

    script = tmp_path / "idle.py"  # TVMScript needs a file to read the source from
    script.write_text(IDLE_CPU_AFTER_PARALLEL_LOOP)
    env = {k: v for k, v in os.environ.items() if k != "TVM_THREAD_POOL_SPIN_COUNT"}
    env["TVM_NUM_THREADS"] = "2"

    def run(extra):
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env={**env, **extra}, timeout=120
        )
        assert result.returncode == 0, result.stderr
        value, idle_cpu = result.stdout.split()
        return value, float(idle_cpu)

    value, idle_cpu = run({})
    assert value == "0"
    assert idle_cpu < 0.02, f"TVM's pool used {idle_cpu} s of CPU while idle"
    # A value the user chose is kept.
    assert run({"TVM_THREAD_POOL_SPIN_COUNT": "1000"})[0] == "1000"
