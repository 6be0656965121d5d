"""``Word``: one written word (or punctuation mark) with its Kokoro phonemes.

A chunk's phoneme string is the words' phonemes joined, each followed by one space when
``space_after`` is set. Word timestamps (the server) map durations back through this.
Every G2P here produces its phoneme string *through* its words, so
``join_words(words).strip() == phonemize(text, lang)`` holds by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    text: str  # the word as written in the input (punctuation marks are their own Words)
    phonemes: str  # its Kokoro phonemes ('' if it yields none)
    space_after: bool  # a single space follows its phonemes in the chunk's phoneme string
    # A space follows its text as written; None: as space_after. Japanese and Mandarin set it (g2p/written.py):
    # their phonemes have spaces between words that their writing has not.
    text_space: bool | None = None


@dataclass(frozen=True)
class SentenceWords:
    """What the G2P made of a sentence, or of its part before or after a pause: its Words, the number of the
    paragraph it is in, whether the sentence ends with it, and how its span is read (the chunker's input)."""

    words: list[Word]
    paragraph: int
    ends_sentence: bool
    voice: str | None = None  # its span's voice (None: the request's), language and rate
    lang: str | None = None
    rate: float = 1.0


def join_words(words: Iterable[Word]) -> str:
    return "".join(w.phonemes + (" " if w.space_after else "") for w in words)


def words_from_pieces(pieces: Iterable[Sequence]) -> list[Word]:
    """(text, phonemes, space_after) triples (a fourth item: text_space) -> Words whose joined phonemes are the
    pieces' joined phonemes with whitespace collapsed to single spaces (no leading or double space).

    Whitespace inside a piece's phonemes becomes single spaces; whitespace at its end counts
    as ``space_after``, at its start as the previous word's ``space_after``. A word with no
    phonemes keeps its space only where that space is not already there."""
    out: list[Word] = []
    for text, phonemes, space, *text_space in pieces:
        core = " ".join(phonemes.split())
        if phonemes[:1].isspace() and out and not out[-1].space_after and out[-1].phonemes:
            out[-1] = Word(out[-1].text, out[-1].phonemes, True)
        space = bool(space) or (bool(core) and phonemes[-1:].isspace())
        if not core and space:
            joined_ends_in_space = not out or _ends_in_space(out)
            space = not joined_ends_in_space
        out.append(Word(text, core, space, *text_space))
    return out


def _ends_in_space(words: list[Word]) -> bool:
    """Whether the joined phonemes so far are empty or end in a space."""
    for w in reversed(words):
        if w.space_after:
            return True
        if w.phonemes:
            return False
    return True


def concat_paragraphs(paragraphs: Iterable[list[Word]]) -> list[Word]:
    """Paragraphs' words in one list, a space between paragraphs (as ``phonemize`` joins them)."""
    pieces: list[tuple[str, str, bool]] = []
    for words in paragraphs:
        if not words:
            continue
        pieces.extend((w.text, w.phonemes, w.space_after) for w in words[:-1])
        last = words[-1]
        pieces.append((last.text, last.phonemes, True))
    return words_from_pieces(pieces)
