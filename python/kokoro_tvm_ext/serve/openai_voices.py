"""OpenAI's voice names as aliases of Kokoro voices, and the ``--voice-alias NAME=VOICE`` flags and file that
add to or change them.

The defaults match each OpenAI voice's gender, and its accent where OpenAI's is British (fable), using
Kokoro's voice of the same name where there is one (alloy, echo, fable, nova, onyx). The list of names is
the ``openai`` package's (3.57): ``alloy ash ballad coral echo fable nova onyx sage shimmer verse marin cedar``.
"""

from __future__ import annotations

import re
from pathlib import Path

from kokoro_tvm_ext.serve.option_files import entries
from kokoro_tvm_ext.support.errors import InvalidInputError

OPENAI_VOICES = {
    "alloy": "af_alloy",
    "ash": "am_adam",
    "ballad": "bm_lewis",
    "coral": "af_heart",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    "sage": "af_sarah",
    "shimmer": "af_bella",
    "verse": "am_michael",
    "marin": "af_kore",
    "cedar": "am_eric",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def parse_alias(text: str, where: str = "--voice-alias") -> tuple[str, str]:
    """``NAME=VOICE`` -> ``(name, voice)``; VOICE is a voice name or a blend (``af_heart:0.6,am_adam:0.4``)."""
    name, sep, voice = text.partition("=")
    name, voice = name.strip(), voice.strip()
    if not sep or not voice:
        raise InvalidInputError(f"{where}: {text.strip()!r} is not NAME=VOICE (e.g. --voice-alias alloy=af_heart)")
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            f"{where}: alias name {name!r} must be letters, digits, '_', '.' or '-' (it is sent as the voice field)"
        )
    return name, voice


def read_alias_file(path: str | Path) -> dict[str, str]:
    """``NAME=VOICE`` lines of ``path``; blank lines and ``#`` comments skipped."""
    return dict(parse_alias(line, where) for line, where in entries(path, "--voice-aliases"))


def configured_aliases(flags: list[str] | None = None, files: list[str] | None = None) -> tuple[dict, dict]:
    """``(every alias, the ones the operator gave)``: OpenAI's defaults, then the files', then the flags' (a later
    one wins). The operator's are checked against the installed voices when the server starts."""
    given: dict[str, str] = {}
    for path in files or ():
        given.update(read_alias_file(path))
    for flag in flags or ():
        name, voice = parse_alias(flag)
        given[name] = voice
    return {**OPENAI_VOICES, **given}, given
