"""sha256 of large files, and remembering it while the file is unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def remembered_sha256(path: Path, stamp: Path) -> str:
    """``file_sha256(path)``, read from ``stamp`` while ``path`` is the same file (a 330 MB
    weights file takes ~0.4 s to hash), keyed by what changes when the file is replaced or
    rewritten: inode, size, mtime. The stamp is written best-effort (a read-only place is
    hashed every time)."""
    st = Path(path).stat()
    identity = {"path": str(Path(path).resolve()), "inode": st.st_ino, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        saved = json.loads(stamp.read_text())
        if {k: saved.get(k) for k in identity} == identity and isinstance(saved.get("sha256"), str):
            return saved["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = file_sha256(path)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({**identity, "sha256": digest}))
        os.replace(tmp, stamp)
    except OSError:
        pass
    return digest
