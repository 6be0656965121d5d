"""Words' text as written: the Japanese and Mandarin G2Ps read a normalized copy of the sentence (NFKC, numbers
spelled out, ``。`` made ``.``), so their words' text is that copy's; :func:`as_written` gives each Word the slice
of the sentence it was read from, and whether a space follows it there (``Word.text_space``), so subtitles and
timestamps show the sentence as typed, without spaces between words where it has none.

The alignment is linear: characters that read the same after NFKC (and the G2P's own punctuation table) match one
to one; a run that does not (a number and its reading) is matched to the text up to the next character that does,
the words inside it sharing it in proportion. Where no alignment is found, the words keep the G2P's text, with
no spaces between them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import replace

from kokoro_tvm_ext.speech.g2p.words import Word

# What a number spelled out as words may carry beside its digits.
_NUMBER_MARKS = set(".,:/%-+．，：／％－＋")
_TRIES = 8  # characters past a run that may join it before the alignment gives up


def nfkc(char: str) -> str:
    return unicodedata.normalize("NFKC", char)


def as_written(sentence: str, words: list[Word], fold: Callable[[str], str] = nfkc) -> list[Word]:
    """``words`` (read from ``sentence``, in order) with their text sliced from ``sentence``; ``fold``: what
    the G2P reads a character as (NFKC; Mandarin's table makes ``。`` ``.``)."""
    offsets, at = [], 0
    for w in words:
        offsets.append(at)
        at += len(w.text)
    where = _positions(sentence, "".join(w.text for w in words), lambda c: fold(c).strip())
    if where is None:  # the G2P's text, joined as these languages are written
        return [replace(w, text_space=False) for w in words]
    bounds = [0, *(where[o] for o in offsets[1:]), len(sentence)]
    out = []
    for w, start, end in zip(words, bounds, bounds[1:]):
        piece = sentence[start:end]
        out.append(replace(w, text=piece.strip(), text_space=piece[-1:].isspace()))
    return out


def _positions(src: str, read: str, fold: Callable[[str], str]) -> list[int] | None:
    """For each character of ``read`` (and its end), the position in ``src`` it was read from; None if the two
    cannot be aligned."""
    where = [0] * (len(read) + 1)
    i = j = 0
    while j < len(read):
        while i < len(src) and src[i].isspace():
            i += 1
        if i == len(src):
            where[j:] = [len(src)] * (len(read) - j + 1)
            return where
        folded = fold(src[i])
        if folded and read.startswith(folded, j):
            where[j : j + len(folded)] = [i] * len(folded)
            i, j = i + 1, j + len(folded)
            continue
        # A run read otherwise (a number, a composed character): up to the next character that reads the same.
        end = i + 1
        while end < len(src) and (unicodedata.category(src[end]) == "Nd" or src[end] in _NUMBER_MARKS):
            end += 1
        anchor, j_end = end, -1
        for _ in range(_TRIES):  # a character read otherwise (℃, ｶﾞ) joins the run; the search stays near
            while anchor < len(src) and not fold(src[anchor]):
                anchor += 1
            if anchor == len(src):
                j_end = len(read)
                break
            # A reading takes a few characters a digit at most (きゅう, 二十): a bounded search keeps this linear.
            j_end = read.find(fold(src[anchor]), j, j + 6 * (anchor - i) + 16)
            if j_end >= 0:
                break
            anchor += 1
        if j_end < 0:
            return None
        for k in range(j, j_end):  # the words inside the run share it in proportion
            where[k] = i + (k - j) * (anchor - i) // (j_end - j)
        i, j = anchor, j_end
    where[len(read)] = len(src)
    return where
