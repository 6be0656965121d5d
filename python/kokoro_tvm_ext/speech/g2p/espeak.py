"""Spanish, French, Hindi, Italian and Brazilian Portuguese through espeak-ng, as KPipeline does.

The phonemes are misaki's ``EspeakG2P(language=...)`` on the whole paragraph (espeak-ng
1.52 bundled by ``espeakng_loader``), exactly KPipeline's ``lang_code`` ``e f h i p`` path:
espeak sees the whole sentence, so liaison, elision and number reading stay as it decides.

Words: espeak separates the words of its output by spaces and keeps punctuation attached
(``ˈola,``). The output is cut at those spaces and each piece's punctuation split off as its
own Word; the pieces are then matched to the written words. Usually it is one piece per
written word. When espeak merges words (French ``l'homme``) or reads one written token as
several (``1234``), pieces are assigned to written words by a monotone alignment that
compares each written word's own espeak reading with runs of pieces, near the path those
readings predict (so its work is linear in the paragraph). Either way the Words
are cut from the paragraph's output, so their joined phonemes are that output exactly.
"""

from __future__ import annotations

import difflib
import re
import threading
from functools import lru_cache

from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.g2p.language_normalize import normalize
from kokoro_tvm_ext.speech.g2p.normalizer import read_rewritten
from kokoro_tvm_ext.speech.g2p.overrides import spliced_words
from kokoro_tvm_ext.speech.g2p.words import Word, words_from_pieces
from kokoro_tvm_ext.speech.languages import LANGUAGES
from kokoro_tvm_ext.speech.markup import Override

# phonemizer's punctuation marks (it keeps them with preserve_punctuation=True), after
# EspeakG2P's own mapping of « » to curly quotes and back of ( ) to parentheses.
PUNCTUATION = set(';:,.!?¡¿—…"«»“”(){}[]')
_lock = threading.Lock()
_LANG_OF_VOICE = {lang.espeak_voice: lang.code for lang in LANGUAGES if lang.espeak_voice}


@lru_cache(maxsize=8)
def espeak_g2p(voice: str):
    """misaki's EspeakG2P for an espeak-ng language (``es``, ``fr-fr``, ``hi``, ``it``, ``pt-br``)."""
    from misaki import espeak  # sets espeak-ng's library and data from espeakng_loader

    return espeak.EspeakG2P(language=voice)


def _phonemize(voice: str, text: str) -> str:
    with _lock:  # one espeak-ng instance per process; its state is global
        ps, _ = espeak_g2p(voice)(text)
    return " ".join(ps.split())


def _split_punctuation(piece: str) -> list[tuple[str, bool]]:
    """``'¿kˈomo'`` -> ``[('¿', True), ('kˈomo', False)]``: (part, is_punctuation)."""
    out: list[tuple[str, bool]] = []
    for run in re.findall(r"[^\w\u0300-\u036f\u02b0-\u02ff]+|[\w\u0300-\u036f\u02b0-\u02ff]+", piece):
        if all(c in PUNCTUATION for c in run):
            out.extend((c, True) for c in run)
        elif out and not out[-1][1]:
            out[-1] = (out[-1][0] + run, False)
        else:
            out.append((run, False))
    return out


def _written_words(text: str) -> list[str]:
    """The written words of ``text`` with their punctuation removed, in order."""
    words = []
    for token in text.split():
        core = "".join(c for c in token if c not in PUNCTUATION and c not in "'’")
        if core:
            words.append(token.strip("".join(PUNCTUATION)))
    return words


# The alignment's bounds, which keep it linear in the paragraph: a written word takes at most SPAN pieces, and
# the alignment strays at most BAND pieces (more when the counts differ, up to MAX_BAND) from the path that
# the words' own readings predict.
SPAN, BAND, MAX_BAND = 6, 4, 8
LONG = 48  # longer readings (long numbers, hostile text) are compared by length alone: difflib's work is quadratic


@lru_cache(maxsize=4096)
def _own_reading(voice: str, word: str) -> str:
    return _phonemize(voice, word)


@lru_cache(maxsize=8192)  # a few MB at most
def _distance(a: str, b: str) -> int:
    """Characters not in common (difflib's matching blocks): 0 for equal strings."""
    if a == b:
        return 0
    if len(a) > LONG or len(b) > LONG:
        return abs(len(a) - len(b))
    matched = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return len(a) + len(b) - 2 * matched


def _band(own: list[str], m: int) -> list[tuple[int, int]]:
    """For each count of words i (0..n), the range of piece counts the alignment may have used by then:
    the words' own piece counts summed, their total's difference from ``m`` spread evenly, plus or minus
    a band that grows with that difference (the pieces the own readings did not predict may sit anywhere)."""
    n = len(own)
    predicted = [0]
    for reading in own:
        predicted.append(predicted[-1] + min(SPAN, len(reading.split())))
    gap = m - predicted[-1]
    band = min(BAND + abs(gap), MAX_BAND)
    out = []
    for i in range(n + 1):
        centre = predicted[i] + round(gap * i / n)
        # also within what SPAN allows: at most SPAN pieces per word before i, and after it
        lo = max(0, centre - band, m - SPAN * (n - i))
        hi = min(m, centre + band, SPAN * i)
        out.append((lo, hi))
    return out


def _align(voice: str, written: list[str], spoken: list[str], cancel: threading.Event | None = None) -> list[list[int]]:
    """For each written word, the indices of the spoken pieces it gets (contiguous, in order,
    every piece assigned once): the alignment with the fewest unmatched characters between each
    word's own reading and its pieces joined, among those near the path the own readings predict
    (so the work is linear in the words: a full table was quadratic, minutes for a long paragraph)."""
    if len(written) == len(spoken):
        return [[i] for i in range(len(spoken))]
    n, m = len(written), len(spoken)
    if m > SPAN * n:  # more pieces than words can take: give the rest to the last word
        return [[] for _ in written[:-1]] + [list(range(m))]
    own = [_own_reading(voice, w) for w in written]
    band = _band(own, m)
    inf = float("inf")
    cost: list[dict[int, float]] = [{0: 0}]  # cost[i][j]: the best alignment of i words to j pieces
    back: list[dict[int, int]] = [{0: 0}]
    for i in range(1, n + 1):
        check_cancelled(cancel)
        lo, hi = band[i]
        previous, reading = cost[i - 1], own[i - 1]
        expected = min(SPAN, len(reading.split()))
        # the likeliest piece counts first, so the length bound below skips most of the others
        counts = sorted(range(SPAN + 1), key=lambda k: (abs(k - expected), k))
        row: dict[int, float] = {}
        steps: dict[int, int] = {}
        for j in range(lo, hi + 1):
            best, step = inf, 0
            for k in counts:  # word i takes pieces j-k .. j-1; ties go to the fewest pieces
                before = previous.get(j - k, inf) if k <= j else inf
                if before == inf:
                    continue
                joined = " ".join(spoken[j - k : j])
                bound = before + abs(len(reading) - len(joined))  # the distance is at least the length difference
                if bound > best or (bound == best and k > step):
                    continue
                c = before + _distance(reading, joined)
                if c < best or (c == best and k < step):
                    best, step = c, k
            if best < inf:
                row[j], steps[j] = best, step
        cost.append(row)
        back.append(steps)
    if m not in cost[n]:  # the band holds no alignment (hostile text only): pieces shared out evenly
        return [list(range(i * m // n, (i + 1) * m // n)) for i in range(n)]
    out, j = [], m
    for i in range(n, 0, -1):
        k = back[i][j]
        out.append(list(range(j - k, j)))
        j -= k
    return out[::-1]


def paragraph_words(paragraph, voice: str, cancel: threading.Event | None = None) -> list[Word]:
    """One paragraph -> Words whose joined phonemes are EspeakG2P's output for it, numbers and symbols espeak
    reads wrong rewritten first (:mod:`.language_normalize`: ``3‰`` is read "3 por mil"), each one Word as
    written."""
    lang = _LANG_OF_VOICE[voice]
    return read_rewritten(
        paragraph, lambda text: normalize(text, lang), lambda given: _paragraph_words(given, voice, cancel)
    )


def _paragraph_words(paragraph, voice: str, cancel: threading.Event | None = None) -> list[Word]:
    """:func:`paragraph_words` of text as espeak reads it. ``paragraph``: a str, or
    text and overrides: espeak then reads the whole paragraph with each override's written words in place
    (so its neighbours read exactly as without it) and the pieces of those words become the override's
    phonemes; an override glued to a neighbouring word (``l'[homme](/ɔm/)``) is read between text runs."""
    if isinstance(paragraph, str):
        return words_from_pieces((t, p, s) for t, p, s, _ in _rows(paragraph, voice, cancel))
    placed = _in_place(paragraph)
    if placed is not None:
        words = _replaced(*placed, voice, cancel)
        if words is not None:
            return words

    return spliced_words(paragraph, lambda text: _paragraph_words(text, voice, cancel), spaced=True)


def _rows(paragraph: str, voice: str, cancel: threading.Event | None) -> list[list]:
    """[text, phonemes, space_after, index of the written word or None] per Word of the paragraph."""
    phonemes = _phonemize(voice, paragraph)
    pieces = [_split_punctuation(p) for p in phonemes.split(" ")] if phonemes else []
    spoken = [i for i, parts in enumerate(pieces) if any(not punct for _, punct in parts)]
    written = _written_words(paragraph)
    owner: dict[int, int] = {}  # spoken piece index -> index of the written word it belongs to
    if written and spoken:
        for w, group in enumerate(_align(voice, written, [phonemes.split(" ")[i] for i in spoken], cancel)):
            for g in group:
                owner[spoken[g]] = w
    out: list[list] = []  # [text, phonemes, space_after, written index or None]
    for i, parts in enumerate(pieces):
        for j, (part, punct) in enumerate(parts):
            space = j == len(parts) - 1 and i < len(pieces) - 1
            w = None if punct else owner.get(i)
            if w is not None and out and out[-1][3] == w and out[-1][2]:
                out[-1][1] += " " + part  # one written word read as several (a number)
                out[-1][2] = space
                continue
            out.append([part if w is None else written[w], part, space, w])
    return out


def _in_place(segments) -> tuple[str, dict[int, Override]] | None:
    """The paragraph's text with the overrides' words in place, and which written words (by index) are
    which override's; None when an override is glued to a neighbouring word or override."""
    text, by_word = "", {}
    for k, seg in enumerate(segments):
        if isinstance(seg, str):
            text += seg
            continue
        following = segments[k + 1] if k + 1 < len(segments) else ""
        if isinstance(following, Override):
            return None
        glued = re.split(r"\s", text)[-1] + re.split(r"\s", following)[0]
        own = len(_written_words(seg.text))
        if not own or any(c not in PUNCTUATION for c in glued):
            return None
        first = len(_written_words(text))
        by_word.update((first + i, seg) for i in range(own))
        text += seg.text
    return text, by_word


def _replaced(text: str, by_word: dict[int, Override], voice: str, cancel) -> list[Word] | None:
    """The paragraph's Words with each override's words made one Word with its phonemes; None when espeak
    read nothing for an override's words (there is then no place to put it)."""
    out: list[list] = []  # [text, phonemes, space_after, written index, Override or None (punctuation)]
    for written, phonemes, space, w in _rows(text, voice, cancel):
        override = by_word.get(w) if w is not None else None
        if override is None:
            out.append([written, phonemes, space, w])
            continue
        k = len(out)
        while k and out[k - 1][3] is None:
            k -= 1
        if k and out[k - 1][3] is override:  # its next word: already spoken, with what came between
            del out[k:]
            out[-1][2] = space
            continue
        out.append([override.text, override.phonemes, space, override])
    if len({id(r[3]) for r in out if isinstance(r[3], Override)}) != len({id(o) for o in by_word.values()}):
        return None
    return words_from_pieces((t, p, s) for t, p, s, _ in out)
