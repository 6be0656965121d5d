"""misaki's English lexicon, from the user cache, read a few words' worth at a time.

misaki's ``Lexicon(british)`` parses two JSON dictionaries (6 MB), adds capitalized and lower-case
variants of their words and checks every entry's phonemes: ~0.2 s of a cold ``say``, for the few dozen
words a sentence looks up. Here the finished tables (misaki's own ``Lexicon`` built once, then stored in
the user cache, one file per misaki version, variant and dictionary files) are kept as shards by the
words' first two characters, each unpacked on the first lookup of a word it holds.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import marshal
import threading
import warnings
from collections.abc import Iterator, Mapping
from importlib import metadata

from kokoro_tvm_ext.support.cache import atomic_write, cache_dir

FORMAT = 1  # bump when the cached file's layout changes
_TABLES = ("golds", "silvers")


def _shard_key(word: str) -> str:
    return word[:2]


class ShardedTable(Mapping):
    """A read-only str-keyed dict kept as marshalled shards, each unpacked on first use."""

    def __init__(self, packed: dict[str, bytes]) -> None:
        self._packed = packed
        self._shards: dict[str, dict] = {}

    def _shard(self, key: str) -> dict:
        shard = self._shards.get(key)
        if shard is None:
            packed = self._packed.get(key)
            shard = self._shards[key] = marshal.loads(packed) if packed is not None else {}
        return shard

    def __getitem__(self, word):
        if not isinstance(word, str):
            raise KeyError(word)
        return self._shard(_shard_key(word))[word]

    def __contains__(self, word) -> bool:
        return isinstance(word, str) and word in self._shard(_shard_key(word))

    def get(self, word, default=None):
        return self._shard(_shard_key(word)).get(word, default) if isinstance(word, str) else default

    def __iter__(self) -> Iterator[str]:
        for key in self._packed:
            yield from self._shard(key)

    def __len__(self) -> int:
        return sum(len(self._shard(key)) for key in self._packed)


def _sources(british: bool) -> list:
    from misaki import data

    variant = "gb" if british else "us"
    return [importlib.resources.files(data) / f"{variant}_{kind}.json" for kind in ("gold", "silver")]


def cache_path(british: bool):
    """One file per misaki version, variant and state of its dictionary files (size, time)."""
    stamp = hashlib.sha256(
        repr([(source.stat().st_size, source.stat().st_mtime_ns) for source in _sources(british)]).encode()
    ).hexdigest()[:12]
    name = f"misaki-{metadata.version('misaki')}-{'gb' if british else 'us'}-{stamp}-v{FORMAT}.marshal"
    return cache_dir(create=False) / "g2p" / name


def _pack(lexicon) -> bytes:
    """The Lexicon's tables as shards, and its other attributes as they are."""
    out = {"attributes": {k: v for k, v in vars(lexicon).items() if k not in _TABLES}}
    for table in _TABLES:
        shards: dict[str, dict] = {}
        for word, phonemes in getattr(lexicon, table).items():
            shards.setdefault(_shard_key(word), {})[word] = phonemes
        out[table] = {key: marshal.dumps(shard) for key, shard in shards.items()}
    return marshal.dumps(out)


_lock = threading.Lock()


def cached_lexicon(en, british: bool):
    """misaki's ``en.Lexicon(british)``, its tables read from the cache (built there first if missing)."""
    path = cache_path(british)
    with _lock:
        try:
            packed = marshal.loads(path.read_bytes())
            attributes, tables = packed["attributes"], {table: packed[table] for table in _TABLES}
        except (OSError, ValueError, EOFError, TypeError, KeyError):
            with warnings.catch_warnings():  # misaki reads its dictionaries with a deprecated importlib call
                warnings.simplefilter("ignore", DeprecationWarning)
                lexicon = en.Lexicon(british)
            try:
                with atomic_write(path) as f:
                    f.write(_pack(lexicon))
            except OSError:
                pass  # a read-only cache: build again next time
            return lexicon
    lexicon = object.__new__(en.Lexicon)
    vars(lexicon).update(attributes)
    for table, shards in tables.items():
        setattr(lexicon, table, ShardedTable(shards))
    return lexicon
