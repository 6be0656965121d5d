"""The cache, a book's work directory and a compiled library are trusted only where no other user can change them,
as ssh trusts a key file: refused in one line naming the path, its owner and mode and the fix when another user
owns it or may write it (it, or a directory above it that they can reach).

The directories are made on the real file system. Directories under pytest's tmp_path sit below a 0700 directory
that nobody else can enter, which hides what is under it; so the refused ones are made in a directory of /tmp that
others can enter (``open_dir``). The other user is a real one, made with useradd (root only; skipped otherwise).
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from fake_artifact import fake_meta_fields

import kokoro_tvm_ext
from kokoro_tvm_ext.book.resume import ChapterStore
from kokoro_tvm_ext.errors import AssetError, UnwritablePathError
from kokoro_tvm_ext.model.artifact_cache import ensure_compiled
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, META, load_checked_meta, write_meta
from kokoro_tvm_ext.model.runtime.kokoro_tvm import KokoroTVM
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS
from kokoro_tvm_ext.support.cache import CACHE_ENV, atomic_write, cache_dir, shared_problem

ME = pwd.getpwuid(os.geteuid()).pw_name


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_dir():
    """A new directory in /tmp, mode 0755: every user can enter it, only we can write it."""
    path = Path(tempfile.mkdtemp(prefix="kokoro-tvm-perm-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def other_user():
    """A second user made for these tests (and removed after them)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("making a second user needs root and useradd")
    name = f"kokoro-test-{os.getpid()}"
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def fake_artifact(directory: Path) -> Path:
    """An artifact whose metadata is sound and whose library is never loaded (the checks come first)."""
    directory.mkdir(mode=0o755)
    (directory / LIBRARY).write_bytes(b"\x7fELF not a library")
    (directory / WEIGHTS).write_bytes(b"\0" * 16)
    write_meta(directory, fake_meta_fields())
    return directory


# -- the cache ----------------------------------------------------------------------------------------------------
def test_the_default_cache_is_created_0700_and_whatever_is_written_first_makes_it(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "home" / ".cache" / "kokoro-tvm"
    assert cache_dir() == root and mode(root) == 0o700

    # The G2P caches look their file up without creating the cache, then write it: the root is still 0700.
    shutil.rmtree(tmp_path / "home")
    old_umask = os.umask(0o002)  # a user-private-group umask: what is made below the root is group-writable
    try:
        with atomic_write(cache_dir(create=False) / "g2p" / "rules.json", "w") as f:
            f.write("{}")
    finally:
        os.umask(old_umask)
    assert mode(root) == 0o700 and mode(root / "g2p") == 0o775
    # Nobody else can enter the root, so what is below it is not theirs to change.
    assert shared_problem(root / "g2p" / "rules.json") is None
    assert cache_dir() == root


def test_a_group_writable_cache_is_refused_in_one_line(open_dir, monkeypatch):
    cache = open_dir / "cache"
    cache.mkdir()
    cache.chmod(0o775)
    env = {**os.environ, CACHE_ENV: str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", "Hello.", "-o", str(open_dir / "out.wav")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == (
        f"kokoro-tvm say: refusing the cache directory {cache}: {cache} (owner {ME}, mode 0775) is writable by its "
        f"group: another user could change what kokoro-tvm trusts in it; run chmod go-w {cache} (or point "
        f"${CACHE_ENV} at a directory of your own)\n"
    )
    assert not (open_dir / "out.wav").exists()

    cache.chmod(0o755)  # the fix it names
    monkeypatch.setenv(CACHE_ENV, str(cache))
    assert cache_dir() == cache


def test_a_cache_under_a_directory_others_can_write_is_refused(open_dir, monkeypatch):
    # Whoever can write the directory above it can rename the cache away and put their own in its place.
    shared = open_dir / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "cache").mkdir(mode=0o700)
    monkeypatch.setenv(CACHE_ENV, str(shared / "cache"))
    with pytest.raises(AssetError, match=rf"{shared} \(owner {ME}, mode 0777\) is writable by its group and everyone"):
        cache_dir()
    # A sticky directory such as /tmp (1777) is fine above it: nobody may rename what is not theirs in it.
    shared.chmod(0o1777)
    assert cache_dir() == shared / "cache"


def test_a_cache_owned_by_another_user_is_refused(open_dir, other_user, monkeypatch):
    cache = open_dir / "cache"
    cache.mkdir(mode=0o755)
    os.chown(cache, other_user.pw_uid, other_user.pw_gid)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    with pytest.raises(AssetError) as caught:
        cache_dir()
    assert str(caught.value) == (
        f"refusing the cache directory {cache}: {cache} (owner {other_user.pw_name}, mode 0755) belongs to another "
        f"user, who could change what kokoro-tvm trusts in it; run chown {ME} {cache} (or point ${CACHE_ENV} at a "
        "directory of your own)"
    )


# -- a compiled library -------------------------------------------------------------------------------------------
def test_a_library_others_can_write_is_not_loaded(open_dir):
    artifact = fake_artifact(open_dir / "artifact")
    load_checked_meta(artifact)  # sound as it is
    (artifact / LIBRARY).chmod(0o775)
    with pytest.raises(
        AssetError,
        match=rf"^refusing to load the artifact {artifact}: {artifact / LIBRARY} \(owner "
        rf"{ME}, mode 0775\) is writable by its group: .*; run chmod go-w {artifact / LIBRARY}$",
    ):
        KokoroTVM(artifact)
    (artifact / LIBRARY).chmod(0o755)
    artifact.chmod(0o777)
    with pytest.raises(AssetError, match=f"{artifact} .owner {ME}, mode 0777. is writable by its group and everyone"):
        KokoroTVM(artifact)
    artifact.chmod(0o755)
    (artifact / META).chmod(0o646)  # the sha256 it checks the library by
    with pytest.raises(AssetError, match=f"{artifact / META} .owner {ME}, mode 0646. is writable by everyone"):
        load_checked_meta(artifact)


def test_an_unsafe_cache_entry_is_refused_not_compiled_again(open_dir, monkeypatch):
    # Compiling again into the same place would not help: the entry is named, and nothing is compiled.
    monkeypatch.setenv(CACHE_ENV, str(open_dir / "cache"))
    entry = cache_dir() / "artifacts" / "some-key"
    entry.parent.mkdir(mode=0o755)
    (open_dir / "cache").chmod(0o755)  # others may enter, so what is inside counts
    fake_artifact(entry).chmod(0o775)
    with pytest.raises(AssetError, match=f"{entry} .owner {ME}, mode 0775. is writable by its group"):
        ensure_compiled(entry, lambda: pytest.fail("compiled"), quiet=True)


def test_a_library_of_another_user_is_not_loaded(open_dir, other_user):
    artifact = fake_artifact(open_dir / "artifact")
    os.chown(artifact / LIBRARY, other_user.pw_uid, other_user.pw_gid)
    with pytest.raises(
        AssetError,
        match=f"{artifact / LIBRARY} .owner {other_user.pw_name}, mode 0644. belongs to "
        f"another user, .*; run chown {ME} {artifact / LIBRARY}",
    ):
        KokoroTVM(artifact)


def run_as(user, script: str, home: Path) -> subprocess.CompletedProcess:
    """``script`` run by ``user`` with this environment's packages. This interpreter may sit where only root may
    go (a pyenv under /root); then the system's of the same version, given the packages' directories."""
    package_dirs = [str(Path(kokoro_tvm_ext.__file__).parents[1]), sysconfig.get_paths()["purelib"]]
    env = {**os.environ, "HOME": str(home), CACHE_ENV: str(home / "cache"), "PYTHONPATH": os.pathsep.join(package_dirs)}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if python is None:
            continue
        probe = subprocess.run(
            ["runuser", "-u", user, "--", python, "-c", "import kokoro_tvm_ext"], env=env, capture_output=True
        )
        if probe.returncode == 0:
            return subprocess.run(
                ["runuser", "-u", user, "--", python, "-c", script],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
    pytest.skip(f"no {version} that {user} may run")


def test_another_user_loads_a_library_root_installed(open_dir, other_user, small_artifact):
    """What the companion wheel's prebuilt libraries are: owned by root, mode 0755/0644, in site-packages. The
    other user (not root, not the owner) loads a real artifact laid out so and synthesizes with it; and refuses
    it once its directory is writable by the group."""
    artifact = open_dir / "site-packages" / "artifact"
    artifact.mkdir(parents=True)
    (open_dir / "site-packages").chmod(0o755)
    artifact.chmod(0o755)
    for name in (LIBRARY, WEIGHTS, META):
        os.link(small_artifact / name, artifact / name)  # the same files, owned by root
        assert os.stat(artifact / name).st_uid == 0 and not mode(artifact / name) & 0o022
    home = open_dir / "home"
    home.mkdir()
    os.chown(home, other_user.pw_uid, other_user.pw_gid)
    script = (
        "import os\n"
        "import numpy as np\n"
        "from kokoro_tvm_ext.model.runtime.kokoro_tvm import KokoroTVM\n"
        "assert os.geteuid() != 0\n"
        f"tts = KokoroTVM({str(artifact)!r}, num_threads=1)\n"
        "audio, _ = tts.synthesize(np.arange(1, 9), np.zeros(256, np.float32), speed=10)\n"
        "print('samples', audio.size)\n"
    )
    done = run_as(other_user.pw_name, script, home)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 0

    artifact.chmod(0o775)
    done = run_as(other_user.pw_name, script, home)
    assert done.returncode != 0
    assert (
        f"AssetError: refusing to load the artifact {artifact}: {artifact} (owner root, mode 0775) is writable by "
        "its group" in done.stderr
    )


# -- a book's work directory --------------------------------------------------------------------------------------
def test_the_work_directory_is_made_0700(tmp_path):
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    with store.held("book.m4b"):
        assert mode(store.dir) == 0o700


@pytest.mark.parametrize("dir_mode, by", [(0o770, "its group"), (0o757, "everyone")])
def test_a_work_directory_others_can_write_is_refused(tmp_path, dir_mode, by):
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    store.dir.mkdir()
    store.dir.chmod(dir_mode)
    with pytest.raises(UnwritablePathError) as caught, store.held("book.m4b"):
        pass
    assert str(caught.value) == (
        f"cannot write book.m4b: its work directory {store.dir} (owner {ME}, mode {dir_mode:04o}) is writable by "
        f"{by}: another user could change what kokoro-tvm trusts in it; run chmod go-w {store.dir} (or remove it: "
        "it holds only finished chapters)"
    )


def test_a_work_directory_of_another_user_is_refused(tmp_path, other_user):
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    store.dir.mkdir(mode=0o700)
    os.chown(store.dir, other_user.pw_uid, other_user.pw_gid)
    message = f"{store.dir} .owner {other_user.pw_name}, mode 0700. belongs to another user, .*; run chown {ME} "
    with pytest.raises(UnwritablePathError, match=message), store.held("book.m4b"):
        pass


def test_a_work_directory_that_is_a_link_is_refused(tmp_path):
    # A link, even to a directory of ours, is not the work directory: its temp files would be removed there.
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (mine / ".notes.tmp").write_text("mine")
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    store.dir.symlink_to(mine)
    with pytest.raises(UnwritablePathError, match=f"its work directory {store.dir} is not a directory of its own"):
        with store.held("book.m4b"):
            pass
    assert (mine / ".notes.tmp").read_text() == "mine"
