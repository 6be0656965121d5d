"""The user cache directory, atomic writes (one file, or several all-or-nothing), writable-path checks and
progress messages.

The cache lives in ``$KOKORO_TVM_CACHE`` if set, else ``~/.cache/kokoro-tvm``.
Everything in it is derived data: deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kokoro_tvm_ext.support.errors import AssetError, UnwritablePathError

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
    """Write ``path`` all-or-nothing (``AtomicFiles`` with one file), creating its directory: into a temp
    file in the same directory, then renamed. On any error the temp file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFiles() as files, files.open(path, mode) as f:
        yield f


@contextlib.contextmanager
def atomic_directory(path: Path | str) -> Iterator[Path]:
    """Fill a temp directory beside ``path``; when the block succeeds it replaces ``path`` (a directory
    that was there is removed first), on any error it is removed and ``path`` is untouched."""

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    """Fail before any slow step if a file cannot be written at ``path`` (``atomic_write`` or
    ``AtomicFiles`` writes it later): by creating and removing a temp file beside it, the one
    check that holds for root (whom ``os.access`` always lets through) and in /proc or /sys
    (which pass some checks but refuse new files)."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise UnwritablePathError(f"cannot write {path}: it is a directory")
    if target.exists() and not target.is_file():
        # replacing a device or a pipe (/dev/null, /dev/stdout) with a regular file is never what was meant
        raise UnwritablePathError(f"cannot write {path}: it is not a regular file (a device, pipe or socket)")
    parent = target.absolute().parent
    if not parent.is_dir():
        raise UnwritablePathError(f"cannot write {path}: directory {parent} does not exist")
    check_writable_dir(parent, path, prefix=f".{target.name}.")


def check_writable_dir(directory: Path, what: str | Path, prefix: str = ".kokoro-tvm-check.") -> None:
    """Create and remove a temp file named ``prefix`` + 8 characters + ``.tmp`` in ``directory``;
    UnwritablePathError naming ``what`` if that fails (no permission, a read-only or pseudo
    filesystem, a name too long)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    except OSError as err:
        raise UnwritablePathError(
            f"cannot write {what}: directory {directory} does not accept new files ({err.strerror or err})"
        ) from None
    os.close(fd)
    os.unlink(tmp)


class AtomicFiles:
    """Several files written all-or-nothing: each into a temp file beside its target
    (``.NAME.<tag>XXXXXXXX.tmp``), then all renamed onto their targets at once by ``commit``.
    As a context manager: committed if the block succeeds; if it fails, every temp file is
    removed and no target is touched. If a rename fails, the targets already renamed are
    removed too (what they replaced is gone), so a set is never left half written. A Ctrl-C
    during the renames (milliseconds) is ignored so that they all happen; a process killed
    outright leaves its temp files, which a caller can recognise by ``tag``."""

    def __init__(self, tag: str = "") -> None:
        self.tag = tag
        self._pending: list[tuple[Path, Path]] = []  # (temp, target)

    def temp(self, path: str | Path) -> Path:
        """A new empty temp file to write ``path``'s content into."""
        path = Path(path)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{self.tag}", suffix=".tmp", dir=path.parent)
        except OSError as err:
            raise UnwritablePathError(f"cannot write {path}: {err.strerror or err}") from None
        os.close(fd)
        self._pending.append((Path(tmp), path))
        return Path(tmp)

    @contextlib.contextmanager
    def open(self, path: str | Path, mode: str = "wb") -> Iterator[IO]:
        """``path``'s temp file, open for writing."""
        with open(self.temp(path), mode) as f:
            yield f

    def commit(self) -> list[Path]:
        """Rename every temp file onto its target; the targets."""
        mode = 0o666 & ~_umask()  # mkstemp makes 0600; give the files normal permissions
        try:
            for tmp, _ in self._pending:
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)  # the content on disk before the name points at it
                finally:
                    os.close(fd)
                os.chmod(tmp, mode)
        except BaseException:
            self.discard()
            raise
        done: list[Path] = []
        with interrupts_deferred():
            try:
                for tmp, path in self._pending:
                    os.replace(tmp, path)
                    done.append(path)
            except BaseException:
                for path in done:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                self.discard()
                raise
        self._pending = []
        return done

    def discard(self) -> None:
        """Remove every temp file not yet renamed."""
        for tmp, _ in self._pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._pending = []

    def __enter__(self) -> AtomicFiles:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (SIGINT) does not stop the block: a short step that must not be cut in half, such as
    renaming a set of finished files. A Ctrl-C during it is dropped: the block has done its work
    by the time it could act. Only the main thread receives signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
