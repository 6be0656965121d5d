"""What the cache holds, and deleting what no installed version uses.

Every compiled artifact is kept per (weights, TVM, kokoro-tvm-ext and its compiler files, CPU): an upgrade
compiles anew and leaves the old entries behind (100-400 MB each). `kokoro-tvm cache` lists the cache with
sizes and marks each compiled entry as this version's or another's; --prune deletes the other versions'
(entries of this version compiled for other CPUs or targets stay: a shared home directory may use them).
Voices, weights and G2P data are never pruned. $KOKORO_TVM_CACHE moves the cache (default ~/.cache/kokoro-tvm).

examples:
  kokoro-tvm cache
  kokoro-tvm cache --prune"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kokoro_tvm_ext.model.artifact_cache import library_key
from kokoro_tvm_ext.model.speaker_encoder.compile import artifact_dir
from kokoro_tvm_ext.support.cache import cache_dir
from kokoro_tvm_ext.support.sizes import human_size


def add_arguments(parser) -> None:
    parser.add_argument(
        "--prune", action="store_true", help="delete the compiled entries another version of TVM or kokoro-tvm-ext made"
    )


def run(args) -> int:
    root = cache_dir(create=False)
    if not root.is_dir():
        print(f"no cache yet at {root}: the first `kokoro-tvm say` fills it")
        return 0
    artifacts = root / "artifacts"
    entries = sorted(p for p in artifacts.iterdir() if not p.name.startswith(".")) if artifacts.is_dir() else []
    current = _current_version()
    stale = [e for e in entries if not current(e.name)]
    sizes = {e: _disk_usage(e) for e in entries}
    print(f"cache: {root}")
    print(f"compiled artifacts ({human_size(sum(sizes.values()))}):")
    for entry in entries:
        whose = "this version" if entry not in stale else "another version: --prune deletes it"
        print(f"  {human_size(sizes[entry]):>10}  {entry.name}  ({whose})")
    others = sorted(p for p in root.iterdir() if p.is_dir() and p.name != "artifacts" and not p.name.startswith("."))
    if others:
        print("also: " + ", ".join(f"{p.name} {human_size(_disk_usage(p))}" for p in others))
    freed = sum(sizes[e] for e in stale)
    if not stale:
        print("nothing to prune: every compiled entry is this version's")
    elif not args.prune:
        print(f"{len(stale)} entries of other versions hold {human_size(freed)}: kokoro-tvm cache --prune deletes them")
    else:
        for entry in stale:
            # renamed first, so that an interrupted delete never leaves half an entry under its own name
            doomed = entry.with_name(f".pruning-{entry.name}")
            os.replace(entry, doomed)
            shutil.rmtree(doomed)
        print(f"deleted {len(stale)} entries of other versions: {human_size(freed)} freed")
    return 0


def _current_version():
    """``name -> bool``: whether a compiled entry's name carries this install's TVM, kokoro-tvm-ext and compiler
    fingerprint (the first three parts of ``library_key``; for the speaker encoder, also its weights and code)."""
    version = "-".join(library_key().split("-")[:3])  # tvm<version>-ext<version>-<compiler fingerprint>
    encoder = artifact_dir().name.split(f"-{version}-")[0]  # speaker-encoder-<weights>-<code>

    def current(name: str) -> bool:
        if name.startswith("speaker-encoder-") and not name.startswith(f"{encoder}-{version}-"):
            return False
        return f"-{version}-" in name or name.startswith(f"{version}-")

    return current


def _disk_usage(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # removed while we walked
                pass
    return total
