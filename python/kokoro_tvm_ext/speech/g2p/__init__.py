"""Text -> Kokoro phonemes for all nine Kokoro-82M languages, offline; tokens; chunking.

One module per G2P family, all behind :func:`phonemize` / :func:`phonemize_words`:

* :mod:`.english`   ``a`` ``b``: misaki's English G2P without en_core_web_sm;
* :mod:`.espeak`    ``e f h i p``: espeak-ng through misaki's EspeakG2P;
* :mod:`.japanese`  ``j``: misaki's Cutlet on MeCab + unidic-lite;
* :mod:`.chinese`   ``z``: misaki's ZHG2P (jieba, pypinyin, cn2an);
* :mod:`.languages` the codes and aliases; :mod:`.words` the ``Word`` type;
* :mod:`.tokens`    phonemes -> token ids.

Each is the path hexgrad's KPipeline takes for that ``lang_code`` with Kokoro-82M, so the
phonemes match KPipeline's. Text is read sentence by sentence, cut where
:mod:`kokoro_tvm_ext.speech.sentences` says sentences end, before any G2P sees it: a
sentence's phonemes never depend on the text around it (what lets a stream of text speak
as the whole text does). A single newline is a space; sentences are joined by a space.
Whitespace in the phoneme string is collapsed to single spaces. Chunking is
:mod:`kokoro_tvm_ext.speech.chunks`'.
"""

from __future__ import annotations

import re
import sys
import threading
import warnings

from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.g2p import chinese, english, espeak, japanese
from kokoro_tvm_ext.speech.g2p.english import english_g2p
from kokoro_tvm_ext.speech.g2p.languages import LANGUAGES, Language, known_languages_text, language, resolve_lang
from kokoro_tvm_ext.speech.g2p.overrides import spliced_words
from kokoro_tvm_ext.speech.g2p.tokens import UnknownPhonemeWarning, count_tokens, default_vocab, tokenize
from kokoro_tvm_ext.speech.g2p.words import Word, concat_paragraphs, join_words
from kokoro_tvm_ext.speech.markup import Override, Pause, Segment, parse_markup, split_at_pauses, written_text
from kokoro_tvm_ext.speech.sentences import ends_paragraph, split_segments
from kokoro_tvm_ext.speech.text_checks import clean_text
from kokoro_tvm_ext.support.errors import InvalidInputError, KokoroError

__all__ = [
    "LANGUAGES",
    "MAX_TOKENS",
    "Language",
    "LanguageMismatchWarning",
    "UnknownPhonemeWarning",
    "Word",
    "count_tokens",
    "default_vocab",
    "english_g2p",
    "join_words",
    "known_languages_text",
    "language",
    "phonemize",
    "phonemize_paragraphs",
    "phonemize_words",
    "read_sentences",
    "resolve_lang",
    "tokenize",
]


class LanguageMismatchWarning(UserWarning):
    """The text has no characters the chosen language's G2P reads as that language."""


def _check_text(text: str) -> str:
    text = clean_text(text)  # for direct callers: Speaker.plan gives cleaned segments, read without this
    if not text.strip():
        raise InvalidInputError("text is empty")
    return text


def _warn_if_foreign(text: str, lang: Language) -> None:
    if not re.search(f"[{lang.script}]", text):
        warnings.warn(
            f"the text has no {lang.name} characters, so {lang.name} G2P may read little or none of it; "
            f"pick its language with --lang (or lang=...) or a voice of that language. Known languages: "
            f"{known_languages_text()}",
            LanguageMismatchWarning,
            stacklevel=3,
        )


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


def _read(sentence, paragraph: int, lang: Language, cancel: threading.Event | None) -> list[Word]:
    """``_words``, with a G2P library's failure on this text turned into one line naming the language and the
    sentence (our own bugs and missing packages keep their traceback)."""
    try:
        return _words(sentence, lang, cancel)
    except Exception as err:  # noqa: BLE001 - sorted by where it was raised
        if not _raised_in_library(err):
            raise
        written = sentence if isinstance(sentence, str) else written_text(sentence)
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


def _collapsed(span: list[str | Override]):
    """A sentence's text with its whitespace collapsed to single spaces: a str, or text and overrides."""
    if all(isinstance(s, str) for s in span):
        return re.sub(r"\s+", " ", "".join(span)).strip()
    return [re.sub(r"\s+", " ", s) if isinstance(s, str) else s for s in span]


def read_sentences(
    text: str | list[Segment], lang: str = "a", cancel: threading.Event | None = None, lexicon=None
) -> list[tuple[int, list[Word] | Pause, bool]]:
    """Text -> its sentences' Words, each sentence read alone (cut by :mod:`kokoro_tvm_ext.speech.sentences`
    before any G2P): ``(paragraph, Words, ends_sentence)``, with the number of the paragraph it is in (blank
    lines separate paragraphs). A pause tag is in the list where it stands; the Words of a sentence on either
    side of it come separately, only the last of them ending the sentence. Sentences without Words are left
    out.

    ``text``: a str (cleaned, and its markup read, here) or the segments
    :func:`~kokoro_tvm_ext.speech.markup.parse_markup` made of text already cleaned (what ``Speaker.plan``
    gives). ``lexicon`` (a :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon`) gives the phonemes of its words.
    Raises RequestCancelled between sentences (and inside long ones) once ``cancel`` is set."""
    info = language(lang)
    segments = parse_markup(_check_text(text)) if isinstance(text, str) else list(text)
    if lexicon is not None:
        segments = lexicon.apply(segments, info.code)
    written = written_text(segments)
    if written.strip():
        _warn_if_foreign(written, info)
    elif not any(isinstance(s, Pause) for s in segments):
        raise InvalidInputError("text is empty")
    out: list[tuple[int, list[Word] | Pause, bool]] = []
    paragraph = 1
    for sentence in split_segments(segments, info.code):
        check_cancelled(cancel)
        spans = split_at_pauses(sentence)
        last = max((i for i, span in enumerate(spans) if not isinstance(span, Pause)), default=-1)
        for i, span in enumerate(spans):
            if isinstance(span, Pause):
                out.append((paragraph, span, False))
            elif words := _read(_collapsed(span), paragraph, info, cancel):
                out.append((paragraph, words, i == last))
        paragraph += ends_paragraph(sentence)
    return out


def phonemize_paragraphs(
    text, lang: str = "a", cancel: threading.Event | None = None, lexicon=None
) -> list[list[Word]]:
    """Text -> its paragraphs' Words (blank lines separate paragraphs; empty ones are dropped), read sentence
    by sentence. Raises RequestCancelled between sentences (and inside long ones) once ``cancel`` is set.
    ``text`` may hold overrides (``[word](/phonemes/)``); ``lexicon`` (a
    :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon`) gives the phonemes of its words."""
    paragraphs: dict[int, list[list[Word]]] = {}
    for number, item, _ in read_sentences(text, lang, cancel, lexicon):
        if not isinstance(item, Pause):
            paragraphs.setdefault(number, []).append(item)
    return [concat_paragraphs(sentences) for sentences in paragraphs.values()]


def phonemize_words(text: str, lang: str = "a", lexicon=None) -> list[Word]:
    """Text -> its Words (written word or punctuation mark, phonemes, space after), such that
    ``join_words(words).strip() == phonemize(text, lang)``. ``lang``: a one-letter code
    (``a``, ``f``, ...) or an alias (``en-us``, ``fr``, ...; see :mod:`.languages`)."""
    return concat_paragraphs(
        item for _, item, _ in read_sentences(text, lang, lexicon=lexicon) if not isinstance(item, Pause)
    )


def phonemize(text: str, lang: str = "a", lexicon=None) -> str:
    """Text -> one Kokoro phoneme string (sentences joined by a space). Raises InvalidInputError for
    empty text or an unknown language. Overrides (``[word](/phonemes/)``) and ``lexicon`` words are spoken
    as given; a pause tag, which has no phonemes, separates the words around it by a space."""
    return join_words(phonemize_words(text, lang, lexicon)).strip()
