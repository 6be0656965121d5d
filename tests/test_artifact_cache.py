"""Cached artifacts are keyed by everything that decides the compiled code."""

from __future__ import annotations

from kokoro_tvm_ext.model import artifact_cache


def test_editing_a_compiler_source_changes_the_key(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "plugin" / "passes").mkdir(parents=True)
    (package / "model").mkdir()
    source = package / "plugin" / "passes" / "pipeline.py"
    source.write_text("PASSES = ['a']\n")
    monkeypatch.setattr(artifact_cache, "__file__", str(package / "model" / "artifact_cache.py"))
    before = artifact_cache.artifact_key("weights-sha")
    assert before == artifact_cache.artifact_key("weights-sha")  # stable
    source.write_text("PASSES = ['a', 'b']\n")
    after = artifact_cache.artifact_key("weights-sha")
    assert after != before
    assert artifact_cache.artifact_key("other-weights") != after


def test_precision_is_part_of_the_key():
    fp32 = artifact_cache.artifact_key("weights-sha")
    assert artifact_cache.artifact_key("weights-sha", precision="fp32") == fp32
    bf16 = artifact_cache.artifact_key("weights-sha", precision="bf16")
    assert bf16 != fp32 and bf16.endswith("-bf16")


def test_an_artifact_of_an_older_format_is_refused_by_name(tmp_path):
    # Format 1 packed Winograd weights for F(2,7) and other points; today's kernels would
    # reject them mid-synthesis, so loading stops first.
    import json

    import pytest

    from kokoro_tvm_ext.model.runtime.artifact import FORMAT_VERSION, LIBRARY, META, read_meta

    (tmp_path / LIBRARY).write_bytes(b"")
    (tmp_path / "weights.bin").write_bytes(b"")
    (tmp_path / META).write_text(json.dumps({"format_version": 1}))
    with pytest.raises(
        ValueError,
        match=f"artifact format 1, this kokoro-tvm-ext reads {FORMAT_VERSION} "
        r"\(it was compiled by an older version\); compile again",
    ):
        read_meta(tmp_path)


class FakeWeights:
    """What ensure_artifact reads of resolved weights."""

    def fingerprint(self) -> str:
        return "f" * 64


def test_the_cache_replaces_a_damaged_entry(small_artifact, tmp_path, monkeypatch, capsys):
    import shutil

    import kokoro_tvm_ext.model.compile
    from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, load_checked_meta
    from kokoro_tvm_ext.speech.artifact import ensure_artifact
    from kokoro_tvm_ext.speech.assets import weights as weights_module

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    compiled = []

    def compile_by_copy(model, out_dir, **kwargs):  # the real compile is tested in tests/kokoro
        compiled.append(out_dir)
        for name in ("kokoro.so", "weights.bin", "meta.json"):
            shutil.copy(small_artifact / name, out_dir / name)

    monkeypatch.setattr(weights_module, "load_model", lambda weights: None)
    monkeypatch.setattr(weights_module, "materialize", lambda weights: weights)
    monkeypatch.setattr(kokoro_tvm_ext.model.compile, "compile_kokoro", compile_by_copy)

    first = ensure_artifact(FakeWeights())
    assert len(compiled) == 1 and "compiling Kokoro" in capsys.readouterr().err
    assert ensure_artifact(FakeWeights()) == first and len(compiled) == 1  # reused

    with open(first / LIBRARY, "r+b") as f:  # damage the entry: an interrupted copy
        f.truncate(1 << 20)
    again = ensure_artifact(FakeWeights())
    err = capsys.readouterr().err
    assert again == first and len(compiled) == 2
    assert "cached artifact cannot be used, compiling it again" in err and "cut short" in err
    assert load_checked_meta(again)["library_bytes"] == (small_artifact / LIBRARY).stat().st_size
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp dirs left


CONCURRENT = """
import shutil, sys, time
from pathlib import Path
import kokoro_tvm_ext.model.compile
from kokoro_tvm_ext.model.artifact_cache import ensure_compiled

source, out, log = map(Path, sys.argv[1:4])

def compile_by_copy(model, out_dir, **kwargs):  # slow enough for the other process to arrive meanwhile
    with open(log, "a") as f:
        f.write("compiled\\n")
    time.sleep(3)
    for name in ("kokoro.so", "weights.bin", "meta.json"):
        shutil.copy(source / name, Path(out_dir) / name)

kokoro_tvm_ext.model.compile.compile_kokoro = compile_by_copy
print(ensure_compiled(out, lambda: None))
"""


def test_two_processes_compile_an_entry_once(small_artifact, tmp_path):
    """Two `say` commands (or test workers) at once: the second waits for the first's compile."""
    import subprocess
    import sys

    out, log = tmp_path / "cache" / "entry", tmp_path / "compiles.log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(small_artifact), str(out), str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    assert log.read_text() == "compiled\n"
    assert {stdout.strip() for stdout, _ in results} == {str(out)}
    assert [p.name for p in out.parent.iterdir()] == ["entry"]  # no temp dirs, no lock files
