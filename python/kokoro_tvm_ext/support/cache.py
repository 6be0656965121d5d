"""The user cache directory, atomic writes and progress messages.

The cache lives in ``$KOKORO_TVM_CACHE`` if set, else ``~/.cache/kokoro-tvm``.
Everything in it is derived data: deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kokoro_tvm_ext.errors import AssetError, UnwritablePathError

CACHE_ENV = "KOKORO_TVM_CACHE"


def cache_dir(create: bool = True) -> Path:
    """The user cache directory (created unless ``create=False``)."""
    base = os.environ.get(CACHE_ENV)
    path = Path(base).expanduser() if base else Path.home() / ".cache" / "kokoro-tvm"
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise AssetError(
                f"cannot create the cache directory {path} ({err.strerror or err}); "
                f"point ${CACHE_ENV} at a writable directory"
            ) from err
    return path


@contextlib.contextmanager
def atomic_write(path: Path | str, mode: str = "wb") -> Iterator[IO]:
    """Write ``path`` all-or-nothing: into a temp file in the same directory, then
    ``os.replace``. On any error the temp file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Progress:
    """Step-by-step progress lines on stderr: ``kokoro-tvm: <what> ... done (1.2 s)``."""

    def __init__(self, stream: IO | None = None, prefix: str = "kokoro-tvm: ") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.prefix = prefix

    def say(self, message: str) -> None:
        print(f"{self.prefix}{message}", file=self.stream, flush=True)

    @contextlib.contextmanager
    def step(self, message: str) -> Iterator[None]:
        start = time.perf_counter()
        print(f"{self.prefix}{message} ...", end="", file=self.stream, flush=True)
        try:
            yield
        except BaseException:
            print(" failed", file=self.stream, flush=True)
            raise
        print(f" done ({time.perf_counter() - start:.1f} s)", file=self.stream, flush=True)


def check_writable_file(path: str | Path) -> None:
    """Fail before any slow step if a file cannot be written at ``path`` (``atomic_write`` writes it later)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise UnwritablePathError(f"cannot write {path}: it is a directory")
    parent = target.resolve().parent
    if not parent.is_dir():
        raise UnwritablePathError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UnwritablePathError(f"cannot write {path}: directory {parent} is not writable")
