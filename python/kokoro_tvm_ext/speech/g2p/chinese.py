"""Mandarin text -> Kokoro phonemes, as KPipeline's ``lang_code='z'`` does it for Kokoro-82M.

KPipeline builds misaki's ``ZHG2P(version=None)``: numbers become Chinese numerals (cn2an),
Chinese punctuation becomes ASCII punctuation plus a space, jieba cuts each run of Han
characters into words, and each word's pinyin (pypinyin, tone numbers) becomes IPA with
tone arrows (misaki's transcription table); words are joined by spaces and everything that
is not Han passes through unchanged. jieba and pypinyin ship their dictionaries in their
wheels. The Words here are those jieba words (after the numeral conversion, so ``2024``
becomes the Word ``二零二四``), and the punctuation marks.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache

from kokoro_tvm_ext.speech.g2p.language_normalize import normalize
from kokoro_tvm_ext.speech.g2p.normalizer import read_rewritten
from kokoro_tvm_ext.speech.g2p.words import Word, words_from_pieces
from kokoro_tvm_ext.speech.g2p.written import as_written, nfkc

_HAN = re.compile(r"[\u4E00-\u9FFF]+|[^\u4E00-\u9FFF]+")
# cn2an writes numbers up to 16 digits in Chinese numerals and leaves longer ones as digits, which no
# phoneme reads: those are read digit by digit (一二三), as Chinese reads long codes.
_LONG_NUMBER = re.compile(r"(?<![.\d])\d{17,}")
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _g2p():

    import jieba
    from misaki import zh

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" chatter on stderr
    return zh.ZHG2P(version=None)


def paragraph_words(paragraph: str) -> list[Word]:
    """One paragraph -> its Words, numbers and symbols ZHG2P reads wrong rewritten first (:mod:`.language_normalize`:
    ``20°C`` is read "20摄氏度"), each one Word as written."""
    return read_rewritten(paragraph, lambda text: normalize(text, "z"), _read)


def _read(paragraph: str) -> list[Word]:
    import cn2an
    import jieba

    zh = type(_g2p())
    original = paragraph
    with _lock:  # jieba builds its dictionary lazily, once
        paragraph = _LONG_NUMBER.sub(lambda m: cn2an.an2cn(m.group(), "direct"), paragraph)
        text = zh.map_punctuation(cn2an.transform(paragraph, "an2cn"))
        pieces: list[tuple[str, str, bool]] = []
        for segment in _HAN.findall(text):
            if "\u4e00" <= segment[0] <= "\u9fff":
                words = jieba.lcut(segment, cut_all=False)
                pieces.extend(
                    (w, zh.word2ipa(w).replace(chr(815), ""), i < len(words) - 1) for i, w in enumerate(words)
                )
                continue
            for part in re.findall(r"\s+|\w+|[^\w\s]", segment):  # passes through as written
                if part.isspace():
                    if pieces:
                        pieces[-1] = (pieces[-1][0], pieces[-1][1], True)
                else:
                    pieces.append((part, part.replace(chr(815), ""), False))
    return as_written(original, words_from_pieces(pieces), lambda char: zh.map_punctuation(nfkc(char)))
