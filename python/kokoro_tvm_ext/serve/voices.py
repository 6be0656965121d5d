"""Voices for the server: the listing, blend syntax, close-match hints, and a small pack cache."""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict

import numpy as np

from ..errors import UnknownVoiceError


def blend_names(spec: str) -> list[str]:
    from ..assets import parse_voice_spec

    return [name for name, _ in parse_voice_spec(spec)]


class VoiceBook:
    """The installed voices; ``pack(spec)`` loads a name or blend once and keeps the last few."""

    def __init__(self, cache_size: int = 16):
        from ..assets import list_voices

        self.voices = list_voices()
        self.names = [v.name for v in self.voices]
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = cache_size
        self._lock = threading.Lock()

    def listing(self) -> list[dict]:
        from ..assets.g2p.languages import BY_CODE

        return [
            {
                "id": v.name,
                "name": v.name,
                "language": BY_CODE[v.language].tag if v.language in BY_CODE else None,
                "gender": v.gender if v.gender != "?" else None,
            }
            for v in self.voices
        ]

    def check(self, spec: str) -> list[str]:
        """The names in a spec; UnknownVoiceError naming close matches, InvalidVoiceError for bad syntax."""
        names = blend_names(spec)
        for name in names:
            if name not in self.names:
                close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UnknownVoiceError(
                    f"unknown voice {name!r}{hint} (GET /v1/audio/voices lists all {len(self.names)})"
                )
        return names

    def pack(self, spec: str) -> np.ndarray:
        from ..assets import load_voice

        self.check(spec)
        key = spec
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        pack = load_voice(key)
        with self._lock:
            self._cache[key] = pack
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return pack
