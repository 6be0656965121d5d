"""Voices for the server: the listing, aliases (OpenAI's voice names), and unknown names answered with close
matches."""

from __future__ import annotations

import difflib

from kokoro_tvm_ext.serve.openai_voices import OPENAI_VOICES
from kokoro_tvm_ext.speech import list_voices, parse_voice_spec
from kokoro_tvm_ext.speech.languages import BY_CODE
from kokoro_tvm_ext.speech.voices import add_voice_dir
from kokoro_tvm_ext.support.errors import InvalidInputError, UnknownVoiceError


def add_voices_dirs(dirs) -> None:
    """`serve --voices-dir DIR`: the voice files in each DIR become voices of this server (and of its Wyoming), by
    name; InvalidInputError naming a directory that is not one, before the model loads."""
    for directory in dirs:
        try:
            add_voice_dir(directory)
        except InvalidInputError as err:
            raise InvalidInputError(f"--voices-dir: {err}") from None


class VoiceBook:
    """The installed voices (``GET /v1/audio/voices``) and the aliases of voices (``aliases``: name -> voice name
    or blend; default: ``openai_voices.OPENAI_VOICES``). ``resolve`` turns aliases in a spec into voices;
    ``check`` names close matches of an unknown voice."""

    def __init__(self, aliases: dict[str, str] | None = None):

        self.voices = list_voices()
        self.names = [v.name for v in self.voices]
        self.aliases = dict(OPENAI_VOICES if aliases is None else aliases)

    def listing(self) -> list[dict]:

        return [
            {
                "id": v.name,
                "name": v.name,
                "language": BY_CODE[v.language].tag if v.language in BY_CODE else None,
                "gender": v.gender if v.gender != "?" else None,
            }
            for v in self.voices
        ]

    def alias_listing(self) -> list[dict]:
        return [{"id": name, "voice": voice} for name, voice in self.aliases.items()]

    def resolve(self, spec: str) -> str:
        """``spec`` with its aliases replaced by their voices: an alias alone becomes its voice spec as written;
        in a blend, each alias's share is split over its voice's (a voice named twice gets the sum)."""

        if spec.strip() in self.aliases:
            return self.aliases[spec.strip()]
        items = parse_voice_spec(spec)
        if not any(name in self.aliases for name, _ in items):
            return spec
        shares: dict[str, float] = {}
        for name, weight in items:
            parts = parse_voice_spec(self.aliases[name]) if name in self.aliases else [(name, 1.0)]
            for part, share in parts:
                shares[part] = shares.get(part, 0.0) + weight * share
        return ",".join(f"{name}:{weight!r}" for name, weight in shares.items())

    def check(self, spec: str) -> list[str]:
        """The names in a spec; UnknownVoiceError naming close matches, InvalidVoiceError for bad syntax."""

        names = [name for name, _ in parse_voice_spec(spec)]
        for name in names:
            if name not in self.names:
                choices = self.names + list(self.aliases)
                close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise UnknownVoiceError(
                    f"unknown voice {name!r}{hint} (GET /v1/audio/voices lists all {len(self.names)} and "
                    f"{len(self.aliases)} aliases)"
                )
        return names

    def choose(self, spec: str) -> str:
        """The voice spec a request's ``voice`` means (aliases resolved), checked; an unknown voice behind an alias
        is named with the alias."""
        resolved = self.resolve(spec)
        try:
            self.check(resolved)
        except UnknownVoiceError as err:
            if resolved == spec:
                raise
            raise UnknownVoiceError(f"voice {spec!r} is an alias of {resolved!r}: {err}") from None
        return resolved

    def check_aliases(self, aliases: dict[str, str]) -> None:
        """Each of ``aliases`` names installed voices and no installed voice is hidden by one: UnknownVoiceError
        (InvalidInputError) naming the alias otherwise."""

        for name, voice in aliases.items():
            if name in self.names:
                raise InvalidInputError(
                    f"--voice-alias {name}={voice}: {name} is an installed voice; pick another name"
                )
            try:
                self.check(voice)
            except InvalidInputError as err:
                raise type(err)(f"--voice-alias {name}={voice}: {err}") from None
