"""Cached artifacts are keyed by everything that decides the compiled code."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from kokoro_tvm_ext.errors import InvalidInputError
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


def compiles_by_copy(monkeypatch, small_artifact) -> list[dict]:
    """Every compile the cache starts, recorded (its keyword arguments and directory) and made by copying
    ``small_artifact``: the real compile is tested in tests/kokoro. The model is never built."""
    import shutil

    compiled = []

    def compile_by_copy(model, out_dir, **kwargs):
        compiled.append({**kwargs, "out_dir": out_dir})
        for name in ("kokoro.so", "weights.bin", "meta.json"):
            shutil.copy(small_artifact / name, out_dir / name)

    monkeypatch.setattr(artifact_cache, "load_kmodel", lambda weights: None)
    monkeypatch.setattr(artifact_cache, "compile_kokoro", compile_by_copy)
    return compiled


@pytest.fixture
def checkpoint(tmp_path, monkeypatch):
    """A weights file (never read: the compile is a copy) in an empty user cache."""
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "fine-tune.safetensors"
    path.write_bytes(b"weights")
    return path


def test_the_cache_replaces_a_damaged_entry(small_artifact, checkpoint, monkeypatch, capsys):
    from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, load_checked_meta
    from kokoro_tvm_ext.model.weights import find_weights

    compiled = compiles_by_copy(monkeypatch, small_artifact)
    first = artifact_cache.ensure_artifact(checkpoint, prebuilt=False)
    assert len(compiled) == 1 and "compiling Kokoro for this CPU" in capsys.readouterr().err
    assert first.name == artifact_cache.artifact_key(hashlib.sha256(b"weights").hexdigest())
    assert artifact_cache.ensure_artifact(find_weights(checkpoint)) == first and len(compiled) == 1  # reused

    with open(first / LIBRARY, "r+b") as f:  # damage the entry: an interrupted copy
        f.truncate(1 << 20)
    again = artifact_cache.ensure_artifact(checkpoint, prebuilt=False)
    err = capsys.readouterr().err
    assert again == first and len(compiled) == 2
    assert "cached artifact cannot be used, compiling it again" in err and "cut short" in err
    assert load_checked_meta(again)["library_bytes"] == (small_artifact / LIBRARY).stat().st_size
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # no temp dirs left


@pytest.mark.parametrize("precision, hiding", [("int8", "KOKORO_TVM_EXT_NO_VNNI"), ("bf16", "KOKORO_TVM_EXT_NO_BF16")])
def test_a_precision_this_cpu_does_not_compute_in_takes_the_fp32_artifact(
    small_artifact, checkpoint, monkeypatch, caplog, precision, hiding
):
    """Where the CPU lacks int8's (bf16's) instructions, their kernels would run f32 without Winograd, slower than
    the fp32 artifact: the cache gives the fp32 artifact itself, with a notice; for a named target, what was asked."""
    from kokoro_tvm_ext.model.runtime import cpu_features

    compiled = compiles_by_copy(monkeypatch, small_artifact)
    fp32 = artifact_cache.ensure_artifact(checkpoint, prebuilt=False)
    monkeypatch.setenv(hiding, "1")
    monkeypatch.setattr(cpu_features, "_fallback_noticed", set())
    with caplog.at_level("WARNING", logger="kokoro_tvm_ext"):
        assert artifact_cache.ensure_artifact(checkpoint, precision=precision, prebuilt=False) == fp32
        assert artifact_cache.ensure_artifact(checkpoint, precision=precision, prebuilt=False) == fp32
    (notice,) = caplog.records  # one line, once
    assert f"{precision} runs as fp32" in notice.getMessage() and hiding in notice.getMessage()
    assert [c["precision"] for c in compiled] == ["fp32"]
    artifact_cache.ensure_artifact(checkpoint, precision=precision, target="x86-64-v4")
    assert [c["precision"] for c in compiled] == ["fp32", precision]


def test_precision_here_follows_the_cpu_and_the_switches(monkeypatch):
    from kokoro_tvm_ext.model.runtime.cpu_features import precision_here

    for var in ("KOKORO_TVM_EXT_NO_VNNI", "KOKORO_TVM_EXT_NO_BF16"):
        monkeypatch.delenv(var, raising=False)
    zen4 = {"avx512f", "avx512vnni", "avx512bf16"}
    x86 = "x86_64"  # the sets are x86's, whatever this machine is (aarch64: tests/test_cpu_features.py)
    assert [precision_here(p, zen4, x86) for p in ("fp32", "bf16", "int8")] == ["fp32", "bf16", "int8"]
    cascade_lake = {"avx512f", "avx512vnni"}
    assert [precision_here(p, cascade_lake, x86) for p in ("bf16", "int8")] == ["fp32", "int8"]
    assert [precision_here(p, None, x86) for p in ("fp32", "bf16", "int8")] == ["fp32"] * 3  # features unknown
    monkeypatch.setenv("KOKORO_TVM_EXT_NO_VNNI", "1")
    assert precision_here("int8", zen4, x86) == "fp32" and precision_here("bf16", zen4, x86) == "bf16"


def test_a_named_target_is_compiled_for_and_keys_its_own_entry(small_artifact, checkpoint, monkeypatch):
    from kokoro_tvm_ext.model.runtime.cpu_features import host_cpu_id

    compiled = compiles_by_copy(monkeypatch, small_artifact)
    here = artifact_cache.ensure_artifact(checkpoint, prebuilt=False)
    v3 = artifact_cache.ensure_artifact(checkpoint, target="x86-64-v3")
    tuned = {"kind": "llvm", "mcpu": "x86-64-v3", "mattr": ["-avx2"]}
    without_avx2 = artifact_cache.ensure_artifact(checkpoint, target=tuned)
    assert [c["target"] for c in compiled] == [None, {"kind": "llvm", "mcpu": "x86-64-v3"}, tuned]
    # Each compiled beside its own entry (atomic_directory's temp dir is named after it).
    for made, entry in zip(compiled, (here, v3, without_avx2)):
        assert made["out_dir"].parent == entry.parent and made["out_dir"].name.startswith(f".{entry.name}.")
    assert len({here, v3, without_avx2}) == 3 and f"-{host_cpu_id()}-" in here.name
    assert "-x86-64-v3-" in v3.name and host_cpu_id() not in v3.name
    # The same target however it is written, found without another compile.
    same = {"mcpu": "x86-64-v3", "kind": "llvm"}
    assert artifact_cache.ensure_artifact(checkpoint, target=same) == v3 and len(compiled) == 3


@pytest.mark.parametrize(
    "target, named",
    [
        ("llvm -mcpu=znver4", "is not an LLVM CPU name"),
        ({"kind": "cuda"}, "a TVM target dict of kind llvm"),
        ({"kind": "llvm", "mcpu": object()}, "not JSON"),
    ],
)
def test_a_bad_target_is_refused_in_one_line(checkpoint, target, named):
    with pytest.raises(InvalidInputError, match=named) as err:
        artifact_cache.ensure_artifact(checkpoint, target=target)
    assert "\n" not in str(err.value)


def test_arm_cpu_names_get_their_triple_and_x86_names_stay():
    spec = artifact_cache.target_spec
    arm = {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}
    for cpu in ("cortex-a72", "cortex-a76", "neoverse-n1", "neoverse-v1", "neoverse-v2", "a64fx", "apple-m1"):
        assert spec(cpu) == {**arm, "mcpu": cpu}
    assert spec("armv8.2-a+dotprod") == {**arm, "mcpu": "generic", "mattr": ["+v8.2a", "+dotprod"]}
    assert spec("armv8-a") == {**arm, "mcpu": "generic", "mattr": ["+v8a"]}
    assert spec("armv9-a+i8mm+fp16") == {**arm, "mcpu": "generic", "mattr": ["+v9a", "+i8mm", "+fullfp16"]}
    assert spec({"kind": "llvm", "mcpu": "cortex-a76", "mattr": ["+dotprod"]})["mtriple"] == "aarch64-linux-gnu"
    for cpu in ("x86-64-v3", "znver4", "skylake-avx512"):
        assert spec(cpu) == {"kind": "llvm", "mcpu": cpu}


def test_a_target_of_another_architecture_is_cross_compiled_without_weights(
    small_artifact, checkpoint, monkeypatch, capsys
):
    """On x86-64, cortex-a76 is compiled (here: copied) into a library-only entry, the same for any weights, and
    nothing is bound (the library's transforms cannot run here). The real cross compile: tests/kokoro."""
    from kokoro_tvm_ext.cli import main
    from kokoro_tvm_ext.model.runtime import cpu_features

    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "x86_64")
    # The copy links nothing, but the cache asks for the cross compiler first: a stand-in, so no toolchain is needed.
    stand_in = checkpoint.parent / "bin" / "aarch64-linux-gnu-gcc"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\nexit 1\n")
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}")
    compiled = compiles_by_copy(monkeypatch, small_artifact)
    monkeypatch.setattr(artifact_cache, "_bind_into", lambda *a: pytest.fail("weights were bound"))
    entry = artifact_cache.ensure_artifact(checkpoint, target="cortex-a76", quiet=True)
    arm = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76"}
    assert [c["target"] for c in compiled] == [arm]
    assert entry.name == f"library-{artifact_cache.library_key(target=arm)}"
    other = checkpoint.with_name("other.safetensors")
    other.write_bytes(b"other weights")
    assert artifact_cache.ensure_artifact(other, target="cortex-a76") == entry and len(compiled) == 1

    assert main(["compile", "--weights", str(checkpoint), "--target", "cortex-a76"]) == 0
    assert capsys.readouterr().out.strip() == str(entry) and len(compiled) == 1


def test_a_missing_cross_compiler_is_named_before_any_work(checkpoint, monkeypatch, capsys):
    from kokoro_tvm_ext.cli import main
    from kokoro_tvm_ext.errors import MissingAssetError
    from kokoro_tvm_ext.model.runtime import cpu_features

    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(artifact_cache, "load_kmodel", lambda weights: pytest.fail("the model was built"))
    monkeypatch.setenv("PATH", str(checkpoint.parent / "empty"))
    with pytest.raises(MissingAssetError) as err:
        artifact_cache.ensure_artifact(checkpoint, target="neoverse-n1")
    assert str(err.value) == (
        "compiling Kokoro for aarch64 on this x86_64 machine needs the cross compiler aarch64-linux-gnu-gcc, "
        "not found on PATH: apt-get install gcc-aarch64-linux-gnu"
    )
    assert not (checkpoint.parent / "cache" / "artifacts").exists()
    out = checkpoint.parent / "out"
    assert main(["compile", "--weights", str(checkpoint), "--target", "cortex-a72", "-o", str(out)]) == 3
    assert "needs the cross compiler aarch64-linux-gnu-gcc" in capsys.readouterr().err and not out.exists()

    riscv = {"kind": "llvm", "mtriple": "riscv64-linux-gnu"}
    with pytest.raises(InvalidInputError, match="cannot compile Kokoro for riscv64 on this x86_64 machine"):
        artifact_cache.ensure_artifact(checkpoint, target=riscv)
    assert main(["compile", "--target", '{"kind": llvm}']) == 2
    assert "kokoro-tvm compile: --target is not valid JSON" in capsys.readouterr().err


CONCURRENT = """
import shutil, sys, time
from pathlib import Path
import kokoro_tvm_ext.model.artifact_cache
from kokoro_tvm_ext.model.artifact_cache import ensure_compiled

source, out, log = map(Path, sys.argv[1:4])

def compile_by_copy(model, out_dir, **kwargs):  # slow enough for the other process to arrive meanwhile
    with open(log, "a") as f:
        f.write("compiled\\n")
    time.sleep(3)
    for name in ("kokoro.so", "weights.bin", "meta.json"):
        shutil.copy(source / name, Path(out_dir) / name)

kokoro_tvm_ext.model.artifact_cache.compile_kokoro = compile_by_copy
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
