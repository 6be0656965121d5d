"""The normalizer engine: written tokens a G2P reads wrong (``42%``, ``10:30``, ``5 km``) rewritten as words it
reads right, by a table of rules, each rewritten token then kept one word under its written text.

A language's table (:mod:`.english_normalize` for English, :mod:`.language_normalize` for the others) is a tuple of
:data:`Rule`: (what, needs, pattern, reading), tried in order; a span rewritten by one rule is not seen by later
ones. :func:`rewrite` applies a table; :func:`read_rewritten` reads a paragraph through a G2P with it and gives
each rewritten span back its written text (``42%`` stays one word, read "forty two percent", for timings and
subtitles).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from kokoro_tvm_ext.speech.g2p.words import Word

Reading = Callable[[re.Match], "str | None"]
# (what, needs, pattern, reading): the pattern is tried only on text with one of the characters ``needs`` (a quick
# test: the patterns cost ~10 us a line each); a reading of None leaves the match as written.
Rule = tuple[str, str, re.Pattern, Reading]
# Where a rewritten span lies in the new text and what was written there: (start, end, written).
Rewritten = tuple[int, int, str]


def compile_rules(rows: Iterable[tuple[str, str, str, Reading]]) -> tuple[Rule, ...]:
    return tuple((what, needs, re.compile(pattern), reading) for what, needs, pattern, reading in rows)


def rewrite(text: str, rules: Iterable[Rule], spans: Iterable[Rewritten] = ()) -> tuple[str, list[Rewritten]]:
    """``text`` with ``rules`` applied -> (the new text, [(start, end, written)]): where in the new text each
    rewritten span lies and what was written there. ``spans``: (start, end, reading) of ``text`` already decided,
    which the rules leave alone."""
    pieces: list[tuple[str, str | None]] = []  # (text, written) for each rewritten piece, (text, None) otherwise
    cursor = 0
    for start, end, reading in sorted(spans):
        pieces += [(text[cursor:start], None), (reading, text[start:end])]
        cursor = end
    pieces.append((text[cursor:], None))
    for _, needs, pattern, reading in rules:
        out: list[tuple[str, str | None]] = []
        for piece, written in pieces:
            if written is not None or not any(c in piece for c in needs):
                out.append((piece, written))
                continue
            cursor = 0
            for m in pattern.finditer(piece):
                new = reading(m)
                if new is None or new == m[0]:
                    continue
                out += [(piece[cursor : m.start()], None), (new, m[0])]
                cursor = m.end()
            out.append((piece[cursor:], None))
        pieces = out
    normalized, rewritten, at = [], [], 0
    for piece, written in pieces:
        if written is not None:
            rewritten.append((at, at + len(piece), written))
        normalized.append(piece)
        at += len(piece)
    return "".join(normalized), rewritten


def read_rewritten(paragraph, normalize: Callable[[str], tuple[str, list[Rewritten]]], read) -> list[Word]:
    """``read`` (a G2P: a str, or text and overrides -> Words) on ``paragraph`` with ``normalize`` applied to its
    text, each rewritten span's Words made one Word under its written text."""
    segments = [paragraph] if isinstance(paragraph, str) else list(paragraph)
    given, text, rewritten = [], "", []
    for segment in segments:
        if isinstance(segment, str):
            new, spans = normalize(segment)
            rewritten += [(len(text) + start, len(text) + end, written) for start, end, written in spans]
            given.append(new)
            text += new
        else:  # an override: read as given
            given.append(segment)
            text += segment.text
    words = read(given[0] if isinstance(paragraph, str) else given)
    return merge_rewritten(words, text, rewritten) if rewritten else words


def merge_rewritten(words: list[Word], text: str, rewritten: list[Rewritten]) -> list[Word]:
    """``words``, read in order from ``text`` (the rewritten text), with the Words of each rewritten span made one:
    its phonemes those Words' joined, its text what was written there. A Word not found in ``text`` where the
    previous one ends (punctuation the G2P maps) stays as it is."""
    out: list[Word] = []
    merged_into: Rewritten | None = None  # the span whose Word out[-1] is
    cursor = 0
    for w in words:
        if not w.text and merged_into is not None and cursor < merged_into[1]:
            at = end = cursor  # a Word with no text of its own inside the span (a share of a reading): joins it
        else:
            at = text.find(w.text, cursor) if w.text else -1
            end = at + len(w.text)
        if at < 0 or re.search(r"\w", text[cursor:at]):
            out.append(w)
            merged_into = None
            continue
        cursor = end
        span = merged_into if at == end else next((s for s in rewritten if s[0] < end and at < s[1]), None)
        if span is None:
            out.append(w)
            merged_into = None
        elif span is merged_into:  # the span's next Word: joined to its first
            last = out[-1]
            gap = " " if last.space_after and last.phonemes and w.phonemes else ""
            out[-1] = replace(
                last,
                text=last.text + text[span[1] : end] if end > span[1] else last.text,
                phonemes=last.phonemes + gap + w.phonemes if w.phonemes else last.phonemes,
                space_after=w.space_after if w.phonemes else last.space_after or w.space_after,
                text_space=w.text_space,
            )
        else:  # a Word reaching past the span keeps its own text there
            written = text[at : span[0]] + span[2] + (text[span[1] : end] if end > span[1] else "")
            out.append(replace(w, text=written))
            merged_into = span
    return out


# Readings the languages' tables share.

ROMAN = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_value(numeral: str) -> int:
    """``XIV`` -> 14 (``numeral`` a valid roman numeral: :data:`ROMAN`)."""
    values = [_ROMAN_VALUES[c] for c in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def spoken_address(text: str, marks: dict[str, str], www: str, space: str = " ") -> str:
    """A URL or e-mail address read out, each of ``marks`` (``@ . /`` ...) as its word with ``space`` around it
    (none in Japanese, Mandarin): example dot com. The scheme is dropped and ``www.`` read as ``www``, the
    language's letters."""
    text = re.sub(r"^(?:https?|ftp)://", "", text).rstrip("/")
    text = re.sub(r"^www\.", www + ".", text)
    for mark, word in marks.items():
        text = text.replace(mark, f"{space}{word}{space}")
    return " ".join(text.split())
