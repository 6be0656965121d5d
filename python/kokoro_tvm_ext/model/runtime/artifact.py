"""The compiled artifact on disk: ``kokoro.so``, ``weights.bin`` and ``meta.json``, and their integrity.

``meta.json`` records each file's size and sha256. A cut-short file (an
interrupted copy) would otherwise be mapped (by ``dlopen``, or as weights) and
kill the process with a bus error on first touch, and an altered library could
run anything; both are refused with an error that names the file and says to
compile again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kokoro_tvm_ext.errors import ArtifactCorruptError, ArtifactMissingError
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS
from kokoro_tvm_ext.support.file_hash import file_sha256, remembered_sha256

LIBRARY = "kokoro.so"
META = "meta.json"
# Each file and the prefix of its size and sha256 in meta.json (library_bytes, ...):
# checked by size on every load, by sha256 once per version of the file.
FILES = {LIBRARY: "library", WEIGHTS: "weights"}
# Bumped whenever the kernels' packed weights change layout, since an artifact
# carries them as constants, or meta.json gains a field loading relies on:
# 2 = Winograd F(4,7) (was F(2,7)), new interpolation points; 3 = library size and sha256;
# 4 = weights lifted out of the library into weights.bin.
FORMAT_VERSION = 4
RECOMPILE_HINT = "compile again (`kokoro-tvm compile`, or delete it to let `kokoro-tvm say` rebuild it)"


def write_meta(out_dir: Path, meta: dict) -> None:
    """Write ``meta.json`` for the files already in ``out_dir`` (their sizes and hashes included)."""
    out_dir = Path(out_dir)
    record = {"format_version": FORMAT_VERSION, **meta}
    for name in FILES:
        record[_key(name, "bytes")] = (out_dir / name).stat().st_size
        record[_key(name, "sha256")] = file_sha256(out_dir / name)
    tmp = out_dir / (META + ".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True))
    os.replace(tmp, out_dir / META)


def _key(name: str, what: str) -> str:
    return f"{FILES[name]}_{what}"


def read_meta(out_dir: Path) -> dict:
    """``meta.json`` of ``out_dir``, checked for format and for the files' sizes (cheap, always)."""
    out_dir = Path(out_dir)
    path = out_dir / META
    missing = [p.name for p in (path, *(out_dir / f for f in FILES)) if not p.is_file()]
    if missing:
        raise ArtifactMissingError(
            f"no compiled Kokoro artifact in {out_dir} (missing {' and '.join(missing)}); "
            "create one with `kokoro-tvm compile` or kokoro_tvm_ext.compile_kokoro(model, out_dir)"
        )
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ArtifactCorruptError(f"{path} is corrupt ({err}); {RECOMPILE_HINT}") from err
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        found = meta.get("format_version") if isinstance(meta, dict) else None
        raise ArtifactCorruptError(
            f"{path} has artifact format {found}, this kokoro-tvm-ext reads {FORMAT_VERSION}; {RECOMPILE_HINT}"
        )
    for name in FILES:
        expected, size = meta.get(_key(name, "bytes")), (out_dir / name).stat().st_size
        if size != expected:
            raise ArtifactCorruptError(
                f"{out_dir / name} is {size} bytes but {META} records {expected}: the file is damaged or was "
                f"cut short (an interrupted copy?); {RECOMPILE_HINT}"
            )
    return meta


# Hashing the ~380 MB of files takes ~0.5 s, so a file's verified hash is remembered in
# a stamp beside it (``.verified.<file>``), keyed by its inode, size and mtime: a later
# load of the same file skips the hash, and a replaced or rewritten file is hashed again.
VERIFIED_STAMP = ".verified"


def verify_files(out_dir: Path, meta: dict) -> None:
    """Check ``kokoro.so`` and ``weights.bin`` against the sha256 in ``meta`` (after ``read_meta``)."""
    out_dir = Path(out_dir)
    for name in FILES:
        digest = remembered_sha256(out_dir / name, out_dir / f"{VERIFIED_STAMP}.{name}")
        recorded = str(meta.get(_key(name, "sha256")))
        if digest != recorded:
            raise ArtifactCorruptError(
                f"{out_dir / name} does not match the sha256 in {META} (got {digest[:16]}..., recorded "
                f"{recorded[:16]}...): the file was altered or damaged; {RECOMPILE_HINT}"
            )


def load_checked_meta(out_dir: Path) -> dict:
    """``read_meta`` plus the files' hashes: what loading an artifact needs before mapping them."""
    meta = read_meta(out_dir)
    verify_files(out_dir, meta)
    return meta
