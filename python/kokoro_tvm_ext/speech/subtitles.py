"""Word timings -> SubRip (.srt) or WebVTT (.vtt) subtitles.

Cues break after sentence-final punctuation, or once a cue holds ``max_chars``
characters; each cue runs from its first word's start to its last word's end.
"""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.errors import InvalidInputError

FORMATS = (".srt", ".vtt")
_SENTENCE_END = (".", "!", "?", "…")


def _clock(seconds: float, sep: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def cues(timings, max_chars: int = 42) -> list[tuple[float, float, str]]:
    """``(start, end, text)`` per cue; punctuation stays attached as in the input."""
    out, words = [], []

    def flush():
        if words:
            text = "".join(t.word + (" " if t.space_after else "") for t in words).strip()
            if text:
                out.append((words[0].start_time, words[-1].end_time, text))
            words.clear()

    for t in timings:
        if not t.word:
            continue
        words.append(t)
        length = len("".join(w.word + " " for w in words))
        if t.word.endswith(_SENTENCE_END) or (length >= max_chars and t.space_after):
            flush()
    flush()
    return out


def render(timings, fmt: str) -> str:
    """The subtitle file's text for ``fmt`` ``.srt`` or ``.vtt``."""
    if fmt not in FORMATS:
        raise ValueError(f"subtitles must be .srt or .vtt, got {fmt!r}")
    lines = ["WEBVTT", ""] if fmt == ".vtt" else []
    for i, (start, end, text) in enumerate(cues(timings), 1):
        if fmt == ".srt":
            lines.append(str(i))
        sep = "," if fmt == ".srt" else "."
        lines += [f"{_clock(start, sep)} --> {_clock(end, sep)}", text, ""]
    return "\n".join(lines)


def subtitle_format(path: str) -> str:
    """The format a path asks for by its suffix; InvalidInputError naming the choices otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InvalidInputError(f"--subtitles {path}: the file name must end in .srt or .vtt")
    return suffix
