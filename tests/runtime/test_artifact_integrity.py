"""A damaged artifact is refused by name before TVM maps it, never a crash.

A library cut short (an interrupted copy) used to kill the process with a bus
error inside dlopen, and mapped weights cut short would do the same on first
touch; meta.json records both files' sizes and sha256 and loading checks them first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from fake_artifact import fake_meta_fields

from kokoro_tvm_ext.errors import ArtifactCorruptError, ArtifactMissingError
from kokoro_tvm_ext.model.runtime import artifact
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, META, VERIFIED_STAMP, WEIGHTS, load_checked_meta
from kokoro_tvm_ext.support import file_hash


def load_in_subprocess(out_dir) -> subprocess.CompletedProcess:
    """KokoroTVM(out_dir) in a fresh process, so a crash shows as a signal, not a dead test run."""
    code = textwrap.dedent(f"""
        import sys
        from kokoro_tvm_ext import KokoroTVM
        try:
            KokoroTVM({str(out_dir)!r})
        except Exception as err:
            print(type(err).__name__ + ": " + str(err))
            sys.exit(3)
        print("loaded")
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def copy_artifact(src, dst, cut: str | None = None, keep_bytes: int = 0):
    """A copy of the artifact in ``src``; the file ``cut`` (if any) keeps its first ``keep_bytes``."""
    dst.mkdir()
    shutil.copy(src / META, dst / META)
    for name in (LIBRARY, WEIGHTS):
        with open(src / name, "rb") as fin, open(dst / name, "wb") as fout:
            if name == cut:
                fout.write(fin.read(keep_bytes))
            else:
                shutil.copyfileobj(fin, fout)
    return dst


def test_meta_records_each_files_size_and_hash(small_artifact):
    import hashlib

    meta = json.loads((small_artifact / META).read_text())
    for name, prefix in ((LIBRARY, "library"), (WEIGHTS, "weights")):
        data = (small_artifact / name).read_bytes()
        assert meta[f"{prefix}_bytes"] == len(data)
        assert meta[f"{prefix}_sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("cut", [LIBRARY, WEIGHTS])
def test_a_truncated_file_is_refused_without_a_crash(small_artifact, tmp_path, cut):
    # The first half, as an interrupted copy leaves it: dlopen of such a library died with SIGBUS.
    keep = (small_artifact / cut).stat().st_size // 2
    damaged = copy_artifact(small_artifact, tmp_path / "cut", cut=cut, keep_bytes=keep)
    result = load_in_subprocess(damaged)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr[-2000:])
    assert result.stdout.startswith("ArtifactCorruptError: ")
    assert str(damaged / cut) in result.stdout
    assert f"is {keep} bytes but meta.json records" in result.stdout
    assert "compile again" in result.stdout


@pytest.mark.parametrize("altered_file", [LIBRARY, WEIGHTS])
def test_an_altered_file_of_the_same_size_is_refused(small_artifact, tmp_path, altered_file):
    altered = copy_artifact(small_artifact, tmp_path / "altered")
    with open(altered / altered_file, "r+b") as f:
        f.seek(os.path.getsize(altered / altered_file) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    result = load_in_subprocess(altered)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr[-2000:])
    assert result.stdout.startswith("ArtifactCorruptError: ")
    assert "does not match the sha256 in meta.json" in result.stdout and str(altered / altered_file) in result.stdout


@pytest.mark.parametrize("missing", [LIBRARY, WEIGHTS, META])
def test_a_missing_file_is_named(tmp_path, missing):
    (tmp_path / LIBRARY).write_bytes(b"\x7fELF")
    (tmp_path / WEIGHTS).write_bytes(b"\0" * 64)
    artifact.write_meta(tmp_path, {"tvm": "x"})
    (tmp_path / missing).unlink()
    with pytest.raises(ArtifactMissingError, match=f"missing {missing}"):
        load_checked_meta(tmp_path)
    assert issubclass(ArtifactMissingError, FileNotFoundError)


def test_corrupt_meta_is_named(tmp_path):
    (tmp_path / LIBRARY).write_bytes(b"\x7fELF")
    (tmp_path / WEIGHTS).write_bytes(b"")
    (tmp_path / META).write_text('{"format_version": 5, "library_')
    with pytest.raises(ArtifactCorruptError, match=f"{META} is corrupt .*compile again"):
        load_checked_meta(tmp_path)


def test_a_verified_hash_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    library = tmp_path / LIBRARY
    library.write_bytes(b"library bytes " * 1000)
    (tmp_path / WEIGHTS).write_bytes(b"weights " * 1000)
    artifact.write_meta(tmp_path, fake_meta_fields())
    hashed = []
    real_hash = file_hash.file_sha256
    monkeypatch.setattr(file_hash, "file_sha256", lambda p: hashed.append(p) or real_hash(p))

    load_checked_meta(tmp_path)
    load_checked_meta(tmp_path)
    assert len(hashed) == 2 and (tmp_path / f"{VERIFIED_STAMP}.{LIBRARY}").is_file()  # each file once

    # Same size, new content, written in place: the stamp no longer matches, so it is hashed again.
    stat = library.stat()
    library.write_bytes(b"LIBRARY BYTES " * 1000)
    os.utime(library, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(ArtifactCorruptError, match="does not match the sha256"):
        load_checked_meta(tmp_path)
    assert len(hashed) == 3
