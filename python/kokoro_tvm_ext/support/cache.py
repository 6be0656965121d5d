"""The user cache directory, atomic writes (one file, or several all-or-nothing), writable-path and
ownership checks and progress messages.

The cache lives in ``$KOKORO_TVM_CACHE`` if set, else ``~/.cache/kokoro-tvm``.
Everything in it is derived data: deleting it is always safe. What is in it is trusted (a compiled
library is code this process runs), so it is created 0700 and refused, as ssh refuses a key file,
when another user could change it (``shared_problem``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from kokoro_tvm_ext.support.errors import AssetError, UnwritablePathError

CACHE_ENV = "KOKORO_TVM_CACHE"


def _cache_root() -> Path:
    base = os.environ.get(CACHE_ENV)
    return Path(base).expanduser() if base else Path.home() / ".cache" / "kokoro-tvm"


def cache_dir(create: bool = True) -> Path:
    """The user cache directory (created 0700 unless ``create=False``); AssetError, naming the directory, its
    owner and mode and the fix, when another user could change it (``shared_problem``)."""
    path = _cache_root()
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as err:
            raise AssetError(
                f"cannot create the cache directory {path} ({err.strerror or err}); "
                f"point ${CACHE_ENV} at a writable directory"
            ) from err
    problem = shared_problem(path) if path.exists() else None
    if problem:
        raise AssetError(
            f"refusing the cache directory {path}: {problem} (or point ${CACHE_ENV} at a directory of your own)"
        )
    return path


def _make_parents(directory: Path) -> None:
    """``directory`` and its parents made; the cache root among them as ``cache_dir`` makes it (0700)."""
    if not directory.is_dir():
        root = _cache_root()
        if directory.is_relative_to(root) and not root.exists():
            cache_dir()
        directory.mkdir(parents=True, exist_ok=True)


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def stat_problem(path: Path, st: os.stat_result, others_reach: bool = True, inside: bool = False) -> str | None:
    """Why another user could change ``path`` (its ``os.stat``), or None: it is owned by another user than
    this process's (root aside, who can change anything anyway), or it is writable by its group or others
    while they can reach it (``others_reach``). ``inside``: a directory above the one checked, where a
    sticky bit (/tmp) lets nobody rename or remove what is not theirs."""
    me = os.geteuid()
    mode = stat.S_IMODE(st.st_mode)
    shown = f"{path} (owner {_user(st.st_uid)}, mode {mode:04o})"
    if st.st_uid not in (me, 0):
        return (
            f"{shown} belongs to another user, who could change what kokoro-tvm trusts in it; "
            f"run chown {_user(me)} {path}"
        )
    sticky = inside and stat.S_ISDIR(st.st_mode) and mode & stat.S_ISVTX
    if others_reach and mode & 0o022 and not sticky:
        by = {0o020: "its group", 0o002: "everyone"}.get(mode & 0o022, "its group and everyone")
        return (
            f"{shown} is writable by {by}: another user could change what kokoro-tvm trusts in it; "
            f"run chmod go-w {path}"
        )
    return None


def shared_problem(path: str | Path) -> str | None:
    """Why another user could change ``path`` (a file or directory, which must exist), or None: as ssh judges
    a key file, ``stat_problem`` for it and every directory above it, along the path as written and along
    the path its links lead to. A directory no other user may enter (no group or other x bit: the cache
    is created 0700) hides everything below it, so what is there may be group-writable (a umask of 002
    makes it so) without anyone else reaching it."""
    given = Path(os.path.abspath(Path(path).expanduser()))
    for target in dict.fromkeys((given, Path(os.path.realpath(given)))):
        others_reach = True
        for step in (*reversed(target.parents), target):
            st = os.stat(step)
            problem = stat_problem(step, st, others_reach, inside=step != target)
            if problem:
                return problem
            others_reach = others_reach and bool(st.st_mode & 0o011)
    return None


@contextlib.contextmanager
def atomic_write(path: Path | str, mode: str = "wb") -> Iterator[IO]:
    """Write ``path`` all-or-nothing (``AtomicFiles`` with one file), creating its directory: into a temp
    file in the same directory, then renamed. On any error the temp file is removed and ``path`` is untouched."""
    path = Path(path)
    _make_parents(path.parent)
    with AtomicFiles() as files, files.open(path, mode) as f:
        yield f


@contextlib.contextmanager
def atomic_directory(path: Path | str) -> Iterator[Path]:
    """Fill a temp directory beside ``path``; when the block succeeds it replaces ``path`` (a directory
    that was there is removed first), on any error it is removed and ``path`` is untouched."""

    path = Path(path)
    _make_parents(path.parent)
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
