"""Overrides in a G2P that does not read them itself (espeak-ng, Japanese, Mandarin): the text between
overrides is read run by run, and each override is spliced in as one Word with exactly its phonemes.

Spacing: in a language written with spaces, an override is separated from its neighbours as the text is;
in Japanese and Mandarin (no spaces in writing, spaces between words in the phonemes) it gets a space on
each side, except before a punctuation mark and after an opening one; their text keeps the spacing the input
has (``text_space``), for subtitles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kokoro_tvm_ext.speech.g2p.words import Word, words_from_pieces
from kokoro_tvm_ext.speech.markup import Override

_OPENING = tuple('“«(¿¡"')
_PUNCTUATION = set(';:,.!?—…"«»“”()¿¡')


def spliced_words(segments: Sequence[str | Override], read: Callable[[str], list[Word]], spaced: bool) -> list[Word]:
    """One paragraph's text runs and overrides -> its Words (``read``: a text run -> its Words)."""
    pieces: list[list] = []  # [text, phonemes, space_after, text_space]
    after_override = False
    for seg in segments:
        if isinstance(seg, Override):
            if pieces and not spaced and not pieces[-1][1].endswith(_OPENING):
                pieces[-1][2] = True
            pieces.append([seg.text, seg.phonemes, False, None if spaced else False])
            after_override = True
            continue
        if seg[:1].isspace() and pieces:
            pieces[-1][2] = True
            pieces[-1][3] = None if spaced else True
        words = read(seg.strip()) if seg.strip() else []
        if words and after_override and not spaced and not _is_punctuation(words[0].phonemes):
            pieces[-1][2] = True
        pieces.extend([w.text, w.phonemes, w.space_after, w.text_space] for w in words)
        if words:
            pieces[-1][2] = seg[-1:].isspace()
            pieces[-1][3] = None if spaced else seg[-1:].isspace()
        after_override = after_override and not words
    return words_from_pieces(pieces)


def _is_punctuation(phonemes: str) -> bool:
    return bool(phonemes) and phonemes[0] in _PUNCTUATION
