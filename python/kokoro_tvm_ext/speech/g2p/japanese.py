"""Japanese text -> Kokoro phonemes, as KPipeline's ``lang_code='j'`` does it.

KPipeline builds misaki's ``JAG2P()``, whose default reader is misaki's Cutlet: MeCab
(fugashi) splits the text into words with UniDic readings, and Cutlet turns kana into
Kokoro's phonemes. misaki asks for the full ``unidic`` package, whose 770 MB dictionary is a
download at run time; here fugashi reads ``unidic-lite`` instead, the same UniDic family
shipped inside its PyPI wheel (no download). ``misaki.ja`` itself also imports pyopenjtalk
(for its other reader), so this module uses ``misaki.cutlet`` directly.

Numbers are read by Cutlet's own kana converter (``3`` -> さん); those Words' text is that
reading. Words are Cutlet's (MeCab words merged by its word list), with the spacing Cutlet
applies between them.
"""

from __future__ import annotations

import re
import sys
import threading
import types
import unicodedata
from functools import lru_cache

from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.g2p.language_normalize import normalize
from kokoro_tvm_ext.speech.g2p.normalizer import read_rewritten
from kokoro_tvm_ext.speech.g2p.words import Word, concat_paragraphs, join_words, words_from_pieces
from kokoro_tvm_ext.speech.g2p.written import as_written

_lock = threading.Lock()
# Cutlet's grouping is cubic in a run of same-type characters, so a sentence longer than this is read in
# pieces: at its commas (the same words and spacing as one call, since no group spans a comma), then, for
# a comma-less stretch this long (hostile text), every MAX_PIECE characters.
MAX_PIECE = 100
_CLAUSE_END = re.compile(r"(?<=[、，,])")
_LONG_NUMBER = re.compile(r"\d{10,}")  # misaki's kana numbers stop at 9 digits (and then break Cutlet)
_NO_SPACE_BEFORE_GLOTTAL = re.compile(r'(?<![!",.:;?»—…”]) (?=ʔ)|(?<=ʔ) (?!["«“])')


# Where mojimoji's full-width-to-half-width table goes beyond jaconv's, on NFKC-normalized text.
_QUOTES_TO_ASCII = str.maketrans({"\u2018": "`", "\u2019": "'", "\u201d": '"'})


def mojimoji_stand_in() -> types.ModuleType:
    """mojimoji's two width conversions on jaconv (pure Python): on NFKC-normalized text, which is all misaki
    gives them, they agree with mojimoji's character for character (tests/speech/test_japanese_widths.py)."""
    import jaconv

    module = types.ModuleType("mojimoji")
    module.zen_to_han = lambda text, kana=True, digit=True, ascii=True: jaconv.z2h(
        text.translate(_QUOTES_TO_ASCII) if ascii else text, kana=kana, digit=digit, ascii=ascii
    )
    module.han_to_zen = lambda text, kana=True, digit=True, ascii=True: jaconv.h2z(
        text, kana=kana, digit=digit, ascii=ascii
    )
    return module


@lru_cache(maxsize=1)
def _misaki_cutlet() -> types.ModuleType:
    """misaki's cutlet module. It imports mojimoji, a C extension with no aarch64 wheel (so `[speak]` leaves it
    out there); where that is missing, the stand-in takes its name first."""
    try:
        import mojimoji  # noqa: F401
    except ImportError:
        sys.modules["mojimoji"] = mojimoji_stand_in()
    from misaki import cutlet as misaki_cutlet

    return misaki_cutlet


@lru_cache(maxsize=1)
def cutlet():
    """misaki's Cutlet with a MeCab tagger on unidic-lite's dictionary."""
    import fugashi
    import unidic_lite

    misaki_cutlet = _misaki_cutlet()

    class UnidicLiteCutlet(misaki_cutlet.Cutlet):
        def __init__(self) -> None:  # noqa: D401 - not Cutlet.__init__: its Tagger() wants full unidic
            self.tagger = fugashi.Tagger(f'-d "{unidic_lite.DICDIR}" -r /dev/null')
            self.table = dict(misaki_cutlet.HEPBURN)
            self.exceptions = {}

        def _normalize_text(self, text: str) -> str:
            """misaki's, with a number of more than 9 digits read digit by digit (as Japanese reads phone
            numbers) instead of breaking misaki's kana converter. Cutlet applies NFKC, so ① ② count as digits."""
            if _LONG_NUMBER.search(unicodedata.normalize("NFKC", text)):
                text = _LONG_NUMBER.sub(_spaced, text)
                if _LONG_NUMBER.search(unicodedata.normalize("NFKC", text)):
                    text = _LONG_NUMBER.sub(_spaced, unicodedata.normalize("NFKC", text))
            return super()._normalize_text(text)

    return UnidicLiteCutlet()


def _spaced(digits: re.Match) -> str:
    return " ".join(digits.group())


def _pieces(sentence: str) -> list[str]:
    """A sentence in pieces of at most MAX_PIECE characters, cut after commas where it can."""
    if len(sentence) <= MAX_PIECE:
        return [sentence]
    out: list[str] = []
    for clause in _CLAUSE_END.split(sentence):
        for start in range(0, len(clause), MAX_PIECE):
            piece = clause[start : start + MAX_PIECE]
            if out and len(out[-1]) + len(piece) <= MAX_PIECE:
                out[-1] += piece
            else:
                out.append(piece)
    return [p for p in out if p]


def _groups(words) -> list[list]:
    """Cutlet's word grouping: from each position, the longest run of same-type MeCab words
    whose joined surface is in misaki's Japanese word list, else the single word."""
    ja_words = _misaki_cutlet().JA_WORDS
    groups, i = [], 0
    while i < len(words):
        end = next((k for k in range(i + 1, len(words)) if words[k].char_type != words[i].char_type), len(words))
        j = next((k for k in range(end, i, -1) if "".join(w.surface for w in words[i:k]) in ja_words), i + 1)
        groups.append(words[i:j])
        i = j
    return groups


def paragraph_words(sentence: str, cancel: threading.Event | None = None) -> list[Word]:
    """One sentence -> its Words, numbers and symbols Cutlet reads wrong rewritten first (:mod:`.language_normalize`:
    ``42%`` is read "42パーセント"), each one Word as written."""
    return read_rewritten(sentence, lambda text: normalize(text, "j"), lambda text: _read_sentence(text, cancel))


def _read_sentence(sentence: str, cancel: threading.Event | None = None) -> list[Word]:
    """One sentence (the G2P reads text sentence by sentence, cut by :mod:`kokoro_tvm_ext.speech.sentences`):
    Cutlet's word grouping is quadratic in the length of its input (40 sentences took 20 s in one call), and
    it never groups or glues across 。！？, whose phonemes are always followed by a space; so reading each
    sentence alone gives what one call on the whole text gives. A long sentence is read in pieces."""
    out = []
    for piece in _pieces(sentence):
        check_cancelled(cancel)
        out.append(_sentence_words(piece))
    return as_written(sentence, concat_paragraphs(out))


def _sentence_words(paragraph: str) -> list[Word]:
    import jaconv

    CutletWord = _misaki_cutlet().Word
    reader = cutlet()
    with _lock:  # MeCab's tagger is not thread-safe
        expected, _ = reader(paragraph)
        normalized = reader._normalize_text(paragraph)
        nodes = [
            CutletWord(
                n.surface,
                jaconv.kata2hira(n.feature.pron or n.feature.kana or n.surface),
                6 if n.char_type == 7 or not n.is_unk else n.char_type,
            )
            for n in reader.tagger(normalized)
        ]
        tokens = reader._romaji_tokens(nodes)
    groups = _groups(nodes)
    if len(groups) != len(tokens):  # Cutlet changed its grouping: keep the phonemes exact, words coarse
        return [Word(paragraph, expected, False)] if expected else []
    pieces = [
        ("".join(w.surface for w in g), tok.surface.replace("(", "«").replace(")", "»"), tok.space)
        for g, tok in zip(groups, tokens)
    ]
    words = words_from_pieces(pieces)
    # Cutlet glues the glottal stop ʔ (small っ) to its neighbours; drop those spaces.
    joined, ends = "", []
    for w in words:
        joined += w.phonemes
        ends.append(len(joined) if w.space_after else None)
        joined += " " if w.space_after else ""
    removed = {m.start() for m in _NO_SPACE_BEFORE_GLOTTAL.finditer(joined)}
    words = [Word(w.text, w.phonemes, w.space_after and end not in removed) for w, end in zip(words, ends)]
    if join_words(words).strip() != expected:
        return [Word(paragraph, expected, False)] if expected else []
    return words
