"""The files a server option names (``--api-key-file``, ``--voice-aliases``): one entry a line, ``#`` comments."""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.support.errors import InvalidInputError


def entries(path: str | Path, flag: str) -> list[tuple[str, str]]:
    """``(line, where)`` for each line of ``path`` with something before its ``#``; ``where`` names the flag, the
    file and the line for an error message. InvalidInputError naming the flag if the file cannot be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
        raise InvalidInputError(f"{flag} {path}: cannot read it ({reason})") from None
    lines = ((number, line.split("#", 1)[0]) for number, line in enumerate(text.splitlines(), 1))
    return [(line, f"{flag} {path}, line {number}") for number, line in lines if line.strip()]
