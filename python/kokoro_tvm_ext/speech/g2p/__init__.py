"""Text -> Kokoro phonemes for all nine Kokoro-82M languages, offline; tokens; chunking.

One module per G2P family, all behind :func:`phonemize` / :func:`phonemize_words`:

* :mod:`.english`   ``a`` ``b``: misaki's English G2P without en_core_web_sm;
* :mod:`.espeak`    ``e f h i p``: espeak-ng through misaki's EspeakG2P;
* :mod:`.japanese`  ``j``: misaki's Cutlet on MeCab + unidic-lite;
* :mod:`.chinese`   ``z``: misaki's ZHG2P (jieba, pypinyin, cn2an);
* :mod:`.languages` the codes and aliases; :mod:`.words` the ``Word`` type;
* :mod:`.tokens`    phonemes -> token ids; :mod:`.chunking` 510-token chunks.

Each is the path hexgrad's KPipeline takes for that ``lang_code`` with Kokoro-82M, so the
phonemes match KPipeline's. Text is read paragraph by paragraph (blank lines); a single
newline is a space; paragraphs are joined by a space. Whitespace in the phoneme string is
collapsed to single spaces.
"""

from __future__ import annotations

import re
import sys
import threading
import warnings

from kokoro_tvm_ext.errors import InvalidInputError, KokoroError
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.g2p.chunking import chunk_phonemes
from kokoro_tvm_ext.speech.g2p.english import english_g2p
from kokoro_tvm_ext.speech.g2p.languages import LANGUAGES, Language, known_languages_text, language, resolve_lang
from kokoro_tvm_ext.speech.g2p.tokens import UnknownPhonemeWarning, count_tokens, default_vocab, tokenize
from kokoro_tvm_ext.speech.g2p.words import Word, concat_paragraphs, join_words
from kokoro_tvm_ext.speech.markup import Override, Pause, parse_markup, written_text
from kokoro_tvm_ext.speech.text_checks import clean_text

__all__ = [
    "LANGUAGES",
    "MAX_TOKENS",
    "Language",
    "LanguageMismatchWarning",
    "UnknownPhonemeWarning",
    "Word",
    "chunk_phonemes",
    "chunk_text",
    "count_tokens",
    "default_vocab",
    "english_g2p",
    "join_words",
    "known_languages_text",
    "language",
    "phonemize",
    "phonemize_paragraphs",
    "phonemize_words",
    "resolve_lang",
    "tokenize",
]


class LanguageMismatchWarning(UserWarning):
    """The text has no characters the chosen language's G2P reads as that language."""


def _check_text(text: str) -> str:
    text = clean_text(text)  # idempotent: Speaker.plan has done it, direct callers of phonemize have not
    if not text.strip():
        raise InvalidInputError("text is empty")
    return text


_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")


def _paragraphs(segments) -> list:
    """Text and overrides -> paragraphs (blank lines and pauses end one), whitespace collapsed to single
    spaces: a paragraph of plain text is a str (read as before), one with overrides a list of both."""
    out: list[list] = [[]]
    for seg in segments:
        if isinstance(seg, Pause):
            out.append([])
        elif isinstance(seg, Override):
            out[-1].append(seg)
        else:
            for i, part in enumerate(_BLANK_LINE.split(seg)):
                if i:
                    out.append([])
                out[-1].append(re.sub(r"\s+", " ", part))
    paragraphs = []
    for para in out:
        if not any(isinstance(s, Override) or s.strip() for s in para):
            continue
        if all(isinstance(s, str) for s in para):
            paragraphs.append("".join(para).strip())
        else:
            paragraphs.append(para)
    return paragraphs


def _warn_if_foreign(text: str, lang: Language) -> None:
    if not re.search(f"[{lang.script}]", text):
        warnings.warn(
            f"the text has no {lang.name} characters, so {lang.name} G2P may read little or none of it; "
            f"pick its language with --lang (or lang=...) or a voice of that language. Known languages: "
            f"{known_languages_text()}",
            LanguageMismatchWarning,
            stacklevel=3,
        )


def _paragraph_words(paragraph, lang: Language, cancel: threading.Event | None = None) -> list[Word]:
    """A paragraph (a str, or text and overrides) -> its Words."""
    if lang.g2p == "misaki-en":
        from kokoro_tvm_ext.speech.g2p import english

        return english.paragraph_words(paragraph, lang.code)
    if lang.g2p == "espeak":
        from kokoro_tvm_ext.speech.g2p import espeak

        return espeak.paragraph_words(paragraph, lang.espeak_voice, cancel)
    if not isinstance(paragraph, str):  # Japanese, Mandarin: the text between overrides, run by run
        from kokoro_tvm_ext.speech.g2p.overrides import spliced_words

        return spliced_words(paragraph, lambda text: _paragraph_words(text, lang, cancel), lang.spaced)
    if lang.g2p == "misaki-ja":
        from kokoro_tvm_ext.speech.g2p import japanese

        return japanese.paragraph_words(paragraph, cancel)
    from kokoro_tvm_ext.speech.g2p import chinese

    return chinese.paragraph_words(paragraph)


def _read(paragraph: str, number: int, lang: Language, cancel: threading.Event | None) -> list[Word]:
    """``_paragraph_words``, with a G2P library's failure on this text turned into one line naming the
    language and the sentence (our own bugs and missing packages keep their traceback)."""
    try:
        return _paragraph_words(paragraph, lang, cancel)
    except Exception as err:  # noqa: BLE001 - sorted by where it was raised
        if not _raised_in_library(err):
            raise
        where = f"paragraph {number}"
        sentences = _SENTENCE.findall(paragraph) if isinstance(paragraph, str) else []
        for sentence in sentences:
            try:
                _paragraph_words(sentence, lang, cancel)
            except Exception as again:  # noqa: BLE001
                if _raised_in_library(again):
                    where += f", the sentence {_shorten(sentence)!r}"
                    break
                raise
        else:
            where += f" ({_shorten(paragraph if isinstance(paragraph, str) else written_text(paragraph))!r})"
        raise InvalidInputError(
            f"the {lang.name} G2P could not read {where}: {type(err).__name__} in {_library(err)}; "
            "rephrase or remove that part"
        ) from err


_SENTENCE = re.compile(r".+?(?:[.!?…。！？]+|$)\s*", re.S)


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


def _words_by_paragraph(text, lang: str, cancel: threading.Event | None = None, lexicon=None) -> list[list[Word]]:
    """``text``: a str (its markup is read here: overrides are spoken as given, a pause ends a paragraph) or
    the segments :func:`~kokoro_tvm_ext.speech.markup.parse_markup` made of it."""
    info = language(lang)
    segments = parse_markup(_check_text(text)) if isinstance(text, str) else list(text)
    if lexicon is not None:
        segments = lexicon.apply(segments, info.code)
    written = written_text(segments)
    if not written.strip():
        raise InvalidInputError("text is empty")
    _warn_if_foreign(written, info)
    out = []
    for number, p in enumerate(_paragraphs(segments), 1):
        check_cancelled(cancel)
        out.append(_read(p, number, info, cancel))
    return out


def phonemize_paragraphs(
    text, lang: str = "a", cancel: threading.Event | None = None, lexicon=None
) -> list[list[Word]]:
    """Text -> its paragraphs' Words (blank lines separate paragraphs; empty ones are dropped). Raises
    RequestCancelled between paragraphs (and inside long ones) once ``cancel`` is set. ``text`` may hold
    overrides (``[word](/phonemes/)``); ``lexicon`` (a :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon`)
    gives the phonemes of its words."""
    return [words for words in _words_by_paragraph(text, lang, cancel, lexicon) if words]


def phonemize_words(text: str, lang: str = "a", lexicon=None) -> list[Word]:
    """Text -> its Words (written word or punctuation mark, phonemes, space after), such that
    ``join_words(words).strip() == phonemize(text, lang)``. ``lang``: a one-letter code
    (``a``, ``f``, ...) or an alias (``en-us``, ``fr``, ...; see :mod:`.languages`)."""
    return concat_paragraphs(_words_by_paragraph(text, lang, lexicon=lexicon))


def phonemize(text: str, lang: str = "a", lexicon=None) -> str:
    """Text -> one Kokoro phoneme string (paragraphs joined by a space). Raises InvalidInputError for
    empty text or an unknown language. Overrides (``[word](/phonemes/)``) and ``lexicon`` words are spoken
    as given; a pause tag, which has no phonemes, separates paragraphs."""
    return join_words(phonemize_words(text, lang, lexicon)).strip()


def chunk_text(
    text: str, vocab: dict[str, int] | None = None, max_tokens: int = MAX_TOKENS, lang: str = "a"
) -> list[str]:
    """Text -> phoneme chunks of at most ``max_tokens`` tokens: paragraphs are hard boundaries,
    then sentences are packed greedily (see :mod:`.chunking`). Raises ``InvalidInputError("text is
    empty")`` for empty text, and InvalidInputError when nothing in it can be pronounced."""
    chunks: list[str] = []
    for words in _words_by_paragraph(text, lang):
        chunks.extend(chunk_phonemes(join_words(words).strip(), vocab, max_tokens))
    if not chunks:
        raise InvalidInputError(
            f"text has nothing to pronounce in {language(lang).name}: {text[:40]!r} "
            "(is it in another language? choose one with --lang or a voice of that language)"
        )
    return chunks
