"""Word timings -> SubRip (.srt) or WebVTT (.vtt) subtitles.

Words are joined as the text is written: a space between two words only where the text has one (Japanese
and Mandarin words touch; their text and punctuation are the input's, :mod:`.g2p.written`). A cue ends where a
sentence ends, by the one definition (:mod:`kokoro_tvm_ext.speech.sentences`): where
the planner ended one (a timing's ``sentence_end``: a paragraph or a heading too), and where the words' text,
read back, ends one (``A. Tester`` is one cue); or once a cue holds ``max_chars`` characters. Each cue
runs from its first word's start to its last word's end.
"""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.speech.sentences import split_sentences
from kokoro_tvm_ext.support.errors import InvalidInputError

FORMATS = (".srt", ".vtt")


def _clock(seconds: float, sep: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _sentence_ends(timings, lang: str) -> set[int]:
    """The indices of the words after which a sentence of their text ends."""
    ends, at = {}, 0
    for i, t in enumerate(timings):
        at += len(t.word) + (1 if t.space_after else 0)
        ends[at] = i
    text = "".join(t.word + (" " if t.space_after else "") for t in timings)
    out, at = set(), 0
    for sentence in split_sentences(text, lang)[:-1]:
        at += len(sentence)
        if at in ends:
            out.add(ends[at])
    return out


def _unspaced(word: str) -> bool:
    """Whether the word ends in a script written without spaces (kana, Han, their full-width marks), where a
    long cue may break with no space to break at."""
    return word[-1] >= "\u2e80"


def cues(timings, max_chars: int = 42, lang: str = "a") -> list[tuple[float, float, str]]:
    """``(start, end, text)`` per cue; punctuation stays attached as in the input. ``lang``: the language
    the words' text is read in to find sentence ends (the planner's ends are in the timings already)."""
    timings = [t for t in timings if t.word]
    sentence_ends = _sentence_ends(timings, lang)
    out, words = [], []

    def flush():
        if words:
            text = "".join(t.word + (" " if t.space_after else "") for t in words).strip()
            if text:
                out.append((words[0].start_time, words[-1].end_time, text))
            words.clear()

    for i, t in enumerate(timings):
        words.append(t)
        length = len("".join(w.word + " " for w in words))
        if t.sentence_end or i in sentence_ends or (length >= max_chars and (t.space_after or _unspaced(t.word))):
            flush()
    flush()
    return out


def render(timings, fmt: str, lang: str = "a") -> str:
    """The subtitle file's text for ``fmt`` ``.srt`` or ``.vtt`` (``lang``: as for :func:`cues`)."""
    if fmt not in FORMATS:
        raise ValueError(f"subtitles must be .srt or .vtt, got {fmt!r}")
    lines = ["WEBVTT", ""] if fmt == ".vtt" else []
    for i, (start, end, text) in enumerate(cues(timings, lang=lang), 1):
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
