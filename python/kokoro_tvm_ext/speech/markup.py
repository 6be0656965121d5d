"""Inline markup in the text: pronunciation overrides and pause tags, read once for every front end. The text
path's first stage: text -> :class:`Span` s (runs of text read one way) and the :class:`Pause` s between them,
which the sentence splitter (:mod:`.sentences`) consumes.

* ``[Kokoro](/kˈOkəɹO/)``: the written word(s) in brackets are spoken with exactly the phonemes between the
  slashes (misaki's syntax), in every language; the word keeps its own timing entry under its written text.
* ``[pause:0.5s]``, ``[pause:500ms]``, ``[pause:1]`` (seconds): that much silence at that place, up to
  :data:`MAX_PAUSE_SECONDS`. It ends the chunk before it.

Other brackets (``[sic]``, ``[1]``) stay text. A malformed pause tag, or override phonemes outside Kokoro's
phoneme set, is an :class:`~kokoro_tvm_ext.support.errors.InvalidInputError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kokoro_tvm_ext.speech.tokens import default_vocab
from kokoro_tvm_ext.support.errors import InvalidInputError

MAX_PAUSE_SECONDS = 10.0

# Either an override (group 1: the written words, 2: the phonemes) or a pause tag (group 3: its length).
# Phonemes hold no slash, bracket or parenthesis: misaki's English G2P, which reads the override itself,
# would end the link at a ')'.
_MARKUP = re.compile(r"\[([^\[\]]+)\]\(/([^/()\[\]]*)/\)|\[pause:([^\[\]]*)\]", re.IGNORECASE)
_LENGTH = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|sec|secs|seconds?)?", re.IGNORECASE)


@dataclass(frozen=True)
class Override:
    """Written words with the phonemes to speak them with (from the inline syntax or a lexicon)."""

    text: str
    phonemes: str


@dataclass(frozen=True)
class Pause:
    """Silence of ``seconds`` at its place; ``tag`` as written, for messages."""

    seconds: float
    tag: str

    def samples(self, sample_rate: int) -> int:
        return round(self.seconds * sample_rate)


Segment = str | Override | Pause


@dataclass(frozen=True)
class Span:
    """A run of text read one way: what is written in it (plain text and overrides, in order) and the language
    (a one-letter code) whose G2P reads it. The stages after markup carry spans whole or cut (``replace``), never
    made anew, so what a span says about its text (today its language) reaches the G2P."""

    segments: tuple[str | Override, ...]
    lang: str

    @property
    def written(self) -> str:
        return written_text(self.segments)

    @property
    def has_words(self) -> bool:
        return any(isinstance(s, Override) or s.strip() for s in self.segments)


def parse_spans(text: str, lang: str, vocab: dict[str, int] | None = None) -> list[Span | Pause]:
    """``text`` -> its spans and pauses in order, each span in ``lang`` (a one-letter code); ``vocab`` as for
    :func:`parse_markup`."""
    out: list[Span | Pause] = []
    run: list[str | Override] = []
    for seg in parse_markup(text, vocab):
        if isinstance(seg, Pause):
            if run:
                out.append(Span(tuple(run), lang))
            out.append(seg)
            run = []
        else:
            run.append(seg)
    if run:
        out.append(Span(tuple(run), lang))
    return out


def segments_of(spans: Iterable[Span | Pause]) -> list[Segment]:
    """Spans and pauses -> the segments they hold, in order (the text as :func:`parse_markup` reads it)."""
    return [seg for item in spans for seg in (item.segments if isinstance(item, Span) else (item,))]


def parse_markup(text: str, vocab: dict[str, int] | None = None) -> list[Segment]:
    """``text`` -> its pieces in order: plain text (str), :class:`Override` and :class:`Pause`. ``vocab``:
    the phoneme set overrides are checked against (default: Kokoro-82M's)."""
    out: list[Segment] = []
    end = 0
    for m in _MARKUP.finditer(text):
        if m.start() > end:
            out.append(text[end : m.start()])
        end = m.end()
        if m.group(3) is not None:
            out.append(Pause(_pause_seconds(m.group(3), m.group()), m.group()))
            continue
        written = " ".join(m.group(1).split())
        if not written:
            raise InvalidInputError(f"the override {m.group()} has no word in its brackets: write [word](/phonemes/)")
        out.append(Override(written, check_phonemes(m.group(2), vocab, f"the override {m.group()}")))
    if end < len(text):
        out.append(text[end:])
    return out


def _pause_seconds(length: str, tag: str) -> float:
    m = _LENGTH.fullmatch(length.strip())
    if m is None:
        raise InvalidInputError(
            f"the pause tag {tag} has no length: write [pause:0.5s], [pause:500ms] or [pause:1] (seconds)"
        )
    seconds = float(m.group(1)) / (1000 if (m.group(2) or "").lower() == "ms" else 1)
    if not 0 < seconds <= MAX_PAUSE_SECONDS:
        raise InvalidInputError(f"the pause tag {tag} must be longer than 0 and at most {MAX_PAUSE_SECONDS:g} s")
    return seconds


def check_phonemes(phonemes: str, vocab: dict[str, int] | None, where: str) -> str:
    """``phonemes`` with whitespace collapsed; InvalidInputError naming ``where`` and every character that is
    not one of Kokoro's phonemes (or when there is none)."""
    if vocab is None:
        vocab = default_vocab()
    phonemes = " ".join(phonemes.split())
    if not phonemes:
        raise InvalidInputError(f"{where} has no phonemes")
    unknown = sorted({c for c in phonemes if c not in vocab and c != " "})
    if unknown:
        listed = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in unknown)
        raise InvalidInputError(
            f"{where} has characters that are not Kokoro phonemes: {listed} (see docs/pronunciation.md for the set)"
        )
    return phonemes


def markup_tags(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, str]]:
    """``(start, end, written)`` of each override and pause tag in ``text[start:end]``, found as
    :func:`parse_markup` finds them but unchecked: an override's written words, a pause's single space."""
    for m in _MARKUP.finditer(text, start, len(text) if end is None else end):
        yield m.start(), m.end(), " " if m.group(3) is not None else " ".join(m.group(1).split())


# What more text could still make markup: a "[" not closed yet, or an override whose link is not finished.
_UNFINISHED = re.compile(r"\[(?:[^\[\]]*|[^\[\]]+\](?:\((?:/[^/()\[\]]*/?)?)?)\Z")


def unfinished_markup(text: str, start: int = 0) -> int | None:
    """Where, in ``text[start:]``, markup begins that more text could still complete (its ``[``), or None:
    text arriving in pieces must not be cut inside it."""
    at = text.rfind("[", start)
    return at if at >= 0 and _UNFINISHED.match(text, at) else None


def written_text(segments: Iterable[Segment]) -> str:
    """The text as written without markup: overrides by their words, pauses by a space."""
    return "".join(s if isinstance(s, str) else s.text if isinstance(s, Override) else " " for s in segments)
