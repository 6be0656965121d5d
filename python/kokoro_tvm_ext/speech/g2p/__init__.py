"""The G2P stage of the text path: sentences -> Kokoro phonemes, as ``Word`` s, for all nine Kokoro-82M
languages, offline.

It consumes the sentences :mod:`kokoro_tvm_ext.speech.sentences` cut (:func:`read_sentences`), each read alone,
so a sentence's phonemes never depend on the text around it (what lets a stream of text speak as the whole text
does); the text path that feeds it (text -> markup -> sentences) is
:mod:`kokoro_tvm_ext.speech.text_path`'s, whole-text ``phonemize`` included. One module per G2P family:

* :mod:`.english`   ``a`` ``b``: misaki's English G2P without en_core_web_sm;
* :mod:`.espeak`    ``e f h i p``: espeak-ng through misaki's EspeakG2P;
* :mod:`.japanese`  ``j``: misaki's Cutlet on MeCab + unidic-lite;
* :mod:`.chinese`   ``z``: misaki's ZHG2P (jieba, pypinyin, cn2an);
* :mod:`.words` the ``Word`` type; :mod:`.overrides` overrides spliced into a G2P that does not read them.

Each is the path hexgrad's KPipeline takes for that ``lang_code`` with Kokoro-82M, so the phonemes match
KPipeline's. Whitespace in a sentence is collapsed to single spaces before its G2P reads it. The languages are
:mod:`kokoro_tvm_ext.speech.languages`', the tokens :mod:`kokoro_tvm_ext.speech.tokens`'.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterable

from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.g2p import chinese, english, espeak, japanese
from kokoro_tvm_ext.speech.g2p.english import english_g2p
from kokoro_tvm_ext.speech.g2p.overrides import spliced_words
from kokoro_tvm_ext.speech.g2p.words import SentenceWords, Word, concat_paragraphs, join_words
from kokoro_tvm_ext.speech.languages import BY_CODE, Language
from kokoro_tvm_ext.speech.markup import Override, Pause, Span
from kokoro_tvm_ext.speech.sentences import Sentence
from kokoro_tvm_ext.support.errors import InvalidInputError, KokoroError

__all__ = [
    "SentenceWords",
    "Word",
    "concat_paragraphs",
    "english_g2p",
    "join_words",
    "read_sentences",
]


def read_sentences(sentences: Iterable[Sentence], cancel: threading.Event | None = None) -> list[SentenceWords | Pause]:
    """Sentences -> their Words, each sentence read alone, each span by its language's G2P: one
    :class:`SentenceWords` per span with Words (the last span of a sentence ends it), the pauses where they
    stand. Raises RequestCancelled between sentences (and inside long ones) once ``cancel`` is set."""
    out: list[SentenceWords | Pause] = []
    for sentence in sentences:
        check_cancelled(cancel)
        last = max((i for i, piece in enumerate(sentence.pieces) if isinstance(piece, Span)), default=-1)
        for i, piece in enumerate(sentence.pieces):
            if isinstance(piece, Pause):
                out.append(piece)
            elif words := _read(piece, sentence.paragraph, cancel):
                out.append(SentenceWords(words, sentence.paragraph, i == last, piece.voice, piece.lang, piece.rate))
    return out


def _words(sentence, lang: Language, cancel: threading.Event | None = None) -> list[Word]:
    """One sentence (a str, or text and overrides) -> its Words, by the language's G2P."""
    if lang.g2p == "misaki-en":
        return english.paragraph_words(sentence, lang.code)
    if lang.g2p == "espeak":
        return espeak.paragraph_words(sentence, lang.espeak_voice, cancel)
    if not isinstance(sentence, str):  # Japanese, Mandarin: the text between overrides, run by run
        return spliced_words(sentence, lambda text: _words(text, lang, cancel), lang.spaced)
    if lang.g2p == "misaki-ja":
        return japanese.paragraph_words(sentence, cancel)

    return chinese.paragraph_words(sentence)


def _read(span: Span, paragraph: int, cancel: threading.Event | None) -> list[Word]:
    """``_words`` of a span, with a G2P library's failure on this text turned into one line naming the language
    and the sentence (our own bugs and missing packages keep their traceback)."""
    lang = BY_CODE[span.lang]
    try:
        return _words(_collapsed(span.segments), lang, cancel)
    except Exception as err:  # noqa: BLE001 - sorted by where it was raised
        if not _raised_in_library(err):
            raise
        written = " ".join(span.written.split())
        raise InvalidInputError(
            f"the {lang.name} G2P could not read paragraph {paragraph}, the sentence {_shorten(written)!r}: "
            f"{type(err).__name__} in {_library(err)}; rephrase or remove that part"
        ) from err


def _shorten(text: str, limit: int = 60) -> str:
    return text.strip() if len(text.strip()) <= limit else text.strip()[: limit - 1] + "…"


def _frames(err: BaseException) -> list[str]:
    """The module names of the traceback's frames, outermost first."""
    tb, out = err.__traceback__, []
    while tb is not None:
        out.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    return out


def _raised_in_library(err: BaseException) -> bool:
    """Raised by a G2P library (misaki, spaCy, phonemizer, fugashi, jieba, cn2an, ...) on the text: an
    exception from a module outside this package, past our last frame, other than a missing package or
    memory; the standard library counts as ours (our code calls it directly)."""
    if isinstance(err, (KokoroError, ImportError, MemoryError)):
        return False
    return _library(err) != ""


def _library(err: BaseException) -> str:
    frames = _frames(err)
    ours = max((i for i, name in enumerate(frames) if name.startswith("kokoro_tvm_ext")), default=-1)
    stdlib = sys.stdlib_module_names
    for name in frames[ours + 1 :]:
        top = name.split(".")[0]
        if top and top not in stdlib and top != "kokoro_tvm_ext":
            return top
    return ""


def _collapsed(segments: tuple[str | Override, ...]):
    """A sentence's text with its whitespace collapsed to single spaces: a str, or text and overrides."""
    if all(isinstance(s, str) for s in segments):
        return re.sub(r"\s+", " ", "".join(segments)).strip()
    return [re.sub(r"\s+", " ", s) if isinstance(s, str) else s for s in segments]
