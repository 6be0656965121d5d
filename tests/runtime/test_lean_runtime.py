"""Synthesis loads neither torch nor TVM's compiler: `say` with a cached artifact, and the runtime alone.

Each check runs in a fresh process (this one has both loaded) and reads that process's own
``sys.modules`` and ``/proc/self/maps``: torch is installed here, so anything that imports
it when it can would show. The server process is checked in tests/serve/test_lean_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")

REPORT = textwrap.dedent("""
    import json, sys
    heavy = ("torch", "transformers", "spacy_curated_transformers", "tvm.relax", "cuda.bindings")
    maps = open("/proc/self/maps").read()
    print("REPORT " + json.dumps({
        "modules": sorted(m for m in sys.modules if sys.modules[m] is not None and m.startswith(heavy)),
        "libraries": sorted({line.split()[-1].rsplit("/", 1)[-1] for line in maps.splitlines()
                             if "libtvm_compiler" in line or "libtorch" in line}),
        "tvm_loaded": "tvm" in sys.modules,
    }))
""")


def run_and_report(code: str, env: dict | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code + REPORT],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("REPORT ")]
    return json.loads(line[len("REPORT ") :])


@pytest.fixture
def cache_with_artifact(small_artifact, tmp_path):
    """A user cache holding ``small_artifact`` as the compiled artifact of a weights file
    (whose bytes are never read as weights: finding the artifact must not load them)."""
    from kokoro_tvm_ext.model.artifact_cache import artifact_key

    weights = tmp_path / "kokoro.pth"
    weights.write_bytes(os.urandom(1 << 20))
    cache = tmp_path / "cache"
    env = {"KOKORO_TVM_CACHE": str(cache)}
    fingerprint = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kokoro_tvm_ext.model.weights import find_weights; "
            "print(find_weights(sys.argv[1]).fingerprint())",
            str(weights),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    ).stdout.strip()
    entry = cache / "artifacts" / artifact_key(fingerprint)
    entry.parent.mkdir(parents=True)
    entry.symlink_to(small_artifact)
    voice = tmp_path / "voice.npy"
    np.save(voice, (np.random.default_rng(3).standard_normal((510, 1, 256)) * 0.3).astype(np.float32))
    return env, weights, voice


def test_say_with_a_cached_artifact_loads_neither_torch_nor_the_compiler(cache_with_artifact, tmp_path):
    env, weights, voice = cache_with_artifact
    out = tmp_path / "hello.wav"
    argv = [
        "say",
        "Hello world, this is a record of 42 things.",
        "--weights",
        str(weights),
        "--voice",
        str(voice),
        "--lang",
        "en-us",
        "--speed",
        "4",
        "-o",
        str(out),
    ]
    report = run_and_report(f"from kokoro_tvm_ext.cli import main\nassert main({argv!r}) == 0\n", env)
    assert report == {"modules": [], "libraries": [], "tvm_loaded": True}, report
    assert out.stat().st_size > 1000


def test_the_runtime_synthesizes_without_torch_or_the_compiler(small_artifact):
    code = textwrap.dedent(f"""
        import numpy as np
        from kokoro_tvm_ext import KokoroTVM
        tts = KokoroTVM({str(small_artifact)!r})
        audio, _ = tts.synthesize(np.array([50, 83, 156, 57, 135]), np.zeros((1, 256), np.float32), speed=4)
        assert audio.size > 0 and np.isfinite(audio).all()
    """)
    assert run_and_report(code) == {"modules": [], "libraries": [], "tvm_loaded": True}


def test_whoever_imports_tvm_first_gets_the_full_tvm_and_the_runtime_uses_it(small_artifact):
    code = textwrap.dedent(f"""
        import tvm
        from tvm import relax  # the compiler side, as a user's own code may load it
        import numpy as np
        from kokoro_tvm_ext import KokoroTVM
        audio, _ = KokoroTVM({str(small_artifact)!r}).synthesize(np.array([50, 83]), np.zeros((1, 256), np.float32),
                                                                   speed=4)
        assert audio.size > 0
    """)
    report = run_and_report(code)
    assert "libtvm_compiler.so" in report["libraries"] and "tvm.relax" in report["modules"]


def test_compiling_after_a_runtime_only_import_is_a_clear_error(small_artifact):
    code = textwrap.dedent(f"""
        from kokoro_tvm_ext import KokoroTVM, compile_kokoro
        KokoroTVM({str(small_artifact)!r})
        try:
            compile_kokoro(None, "unused")
        except RuntimeError as err:
            print("ERROR", err)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "ERROR TVM was imported without its compiler" in result.stdout, result.stderr[-2000:]
    assert "compile in a new process" in result.stdout


def test_the_package_imports_without_torch_or_cudas_driver_bindings():
    """Both are installed here (torch's CUDA wheels bring cuda-bindings); tvm_ffi would import both."""
    assert run_and_report("import kokoro_tvm_ext\n")["modules"] == []


def test_a_library_imported_with_torch_hidden_sees_none_and_torch_imports_afterwards(tmp_path):
    (tmp_path / "wants_torch.py").write_text(
        "try:\n    import torch\n    HAS_TORCH = True\nexcept ImportError:\n    HAS_TORCH = False\n"
    )
    code = textwrap.dedent("""
        import sys
        from kokoro_tvm_ext.support.torch_free import torch_hidden
        with torch_hidden():
            import wants_torch
        assert wants_torch.HAS_TORCH is False and "torch" not in sys.modules
        import torch  # nothing is left blocked
        with torch_hidden():  # already imported: left alone
            import torch as again
        assert again is torch
        print("OK")
    """)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert result.stdout.strip() == "OK", result.stderr[-2000:]


def test_a_weights_file_is_hashed_once_while_it_is_unchanged(tmp_path, monkeypatch):
    from kokoro_tvm_ext.model.weights import find_weights
    from kokoro_tvm_ext.support import file_hash

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"weights " * 1000)
    hashed = []
    real = file_hash.file_sha256
    monkeypatch.setattr(file_hash, "file_sha256", lambda p: hashed.append(p) or real(p))
    import hashlib

    expected = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert find_weights(str(weights)).fingerprint() == expected
    assert find_weights(str(weights)).fingerprint() == expected  # a new run: from the stamp
    assert len(hashed) == 1
    stat = weights.stat()
    weights.write_bytes(b"WEIGHTS " * 1000)  # rewritten in place, same size
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert find_weights(str(weights)).fingerprint() == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert len(hashed) == 2


def test_the_cpu_id_names_vendor_family_model_and_a_hash_of_the_flags(tmp_path):
    import hashlib

    from kokoro_tvm_ext.model.runtime.cpu_features import host_cpu_id

    flags = "fpu sse2 avx2 avx512f"
    block = f"processor\t: {{n}}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: {flags}\n\n"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(block.format(n=0) + block.format(n=1))
    expected = "amd-f25m17-" + hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:8]
    assert host_cpu_id(cpuinfo) == expected
    cpuinfo.write_text(block.format(n=0).replace(" avx512f", ""))  # a VM that hides AVX-512
    assert host_cpu_id(cpuinfo) != expected


def test_the_artifact_key_needs_no_tvm():
    code = (
        "import sys\nfrom kokoro_tvm_ext.model.artifact_cache import artifact_key\n"
        "print(artifact_key('w' * 64))\nassert 'tvm' not in sys.modules, 'tvm was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    from kokoro_tvm_ext.model.artifact_cache import artifact_key

    assert result.stdout.strip() == artifact_key("w" * 64)  # the same key as a process with TVM loaded
