"""Voices for the server: the listing, and unknown names answered with close matches."""

from __future__ import annotations

import difflib

from kokoro_tvm_ext.errors import UnknownVoiceError


class VoiceBook:
    """The installed voices (``GET /v1/audio/voices``); ``check`` names close matches of an unknown one."""

    def __init__(self):
        from kokoro_tvm_ext.speech import list_voices

        self.voices = list_voices()
        self.names = [v.name for v in self.voices]

    def listing(self) -> list[dict]:
        from kokoro_tvm_ext.speech.g2p.languages import BY_CODE

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
        from kokoro_tvm_ext.speech import parse_voice_spec

        names = [name for name, _ in parse_voice_spec(spec)]
        for name in names:
            if name not in self.names:
                close = difflib.get_close_matches(name, self.names, n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UnknownVoiceError(
                    f"unknown voice {name!r}{hint} (GET /v1/audio/voices lists all {len(self.names)})"
                )
        return names
