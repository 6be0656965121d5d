"""The text path, its order written once: text -> markup -> spans -> sentences -> G2P -> Words.

Each stage consumes what the one before it made and imports nothing after it (``tests/speech/test_text_path.py``
checks it), as a tokenizer's normalizer, pre-tokenizer and model do:

1. :func:`~kokoro_tvm_ext.speech.text_checks.clean_text`: the one normalization and check of text;
2. :mod:`.markup` (or :mod:`.ssml` for a ``<speak>`` document): inline overrides, pause, voice and rate tags
   -> :class:`~kokoro_tvm_ext.speech.markup.Span` s (runs of text read one way: voice, language, rate) and the
   pauses and marks between them;
3. :mod:`.lexicon`: a user's words made overrides inside the spans;
4. :mod:`.sentences`: the spans cut into sentences (a blank line, so a heading, always ends one), each in order
   with the number of its paragraph;
5. :mod:`.g2p`: each sentence read alone -> its Words (:class:`~kokoro_tvm_ext.speech.g2p.words.SentenceWords`).

``Speaker.plan`` (every front end) chunks what :func:`read_text` gives (:mod:`.chunks`); ``phonemize`` and friends
join it.
"""

from __future__ import annotations

import threading

from kokoro_tvm_ext.speech.g2p import read_sentences
from kokoro_tvm_ext.speech.g2p.words import SentenceWords, Word, concat_paragraphs, join_words
from kokoro_tvm_ext.speech.languages import language, warn_if_foreign
from kokoro_tvm_ext.speech.markup import Aliases, Pause, Span, parse_spans, segments_of, written_text
from kokoro_tvm_ext.speech.sentences import split_spans
from kokoro_tvm_ext.speech.ssml import is_ssml, parse_ssml
from kokoro_tvm_ext.speech.text_checks import clean_text
from kokoro_tvm_ext.support.errors import InvalidInputError


def read_text(
    text: str,
    lang: str = "a",
    *,
    vocab: dict[str, int] | None = None,
    lexicon=None,
    cancel: threading.Event | None = None,
    aliases: Aliases | None = None,
    tags: bool = True,
    ssml: bool | None = None,
    voice_langs: bool = True,
) -> list[SentenceWords | Pause]:
    """Text -> its sentences' Words and its pauses, in order, through every stage of the module. ``lang``: a
    one-letter code or an alias (``en-us``, ``fr``, ...); ``vocab``: the phoneme set overrides are checked
    against (default: Kokoro-82M's); ``lexicon`` (a :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon`) gives the
    phonemes of its words. Raises InvalidInputError for an unknown language, text that is empty or malformed
    markup; warns (:class:`~kokoro_tvm_ext.speech.languages.LanguageMismatchWarning`) when the text has none of
    the language's script; raises RequestCancelled between sentences (and inside long ones) once ``cancel`` is
    set. Voice and rate tags (``tags``; ``aliases`` as for :func:`~kokoro_tvm_ext.speech.markup.parse_spans`)
    and SSML (``ssml``: True, False, or None: when the text starts with ``<speak`` or ``<?xml``) give spans in
    other voices, languages and rates: each :class:`SentenceWords` carries its span's."""
    info = language(lang)
    spans = read_markup(text, info.code, vocab=vocab, aliases=aliases, tags=tags, ssml=ssml, voice_langs=voice_langs)
    if lexicon is not None:
        spans = lexicon.apply(spans)
    segments = segments_of(spans)
    written = written_text(segments)
    if written.strip():
        own = written_text(segments_of(s for s in spans if isinstance(s, Span) and s.lang == info.code))
        if own.strip():  # text only in other voices' languages is theirs to read
            warn_if_foreign(own, info, stacklevel=2)
    elif not any(isinstance(s, Pause) for s in segments):
        raise InvalidInputError("text is empty")
    return read_sentences(split_spans(spans, info.code), cancel)


def read_markup(
    text: str,
    lang: str = "a",
    *,
    vocab: dict[str, int] | None = None,
    aliases: Aliases | None = None,
    tags: bool = True,
    ssml: bool | None = None,
    voice_langs: bool = True,
) -> list[Span | Pause]:
    """The text path's first stages, clean -> markup (or SSML): the spans and pauses :func:`read_text` reads,
    each markup error raised (a front end checks its text here before anything slow). ``voice_langs``: a voice
    tag switches to its voice's language (False: a language was given, and every voice reads in it)."""
    text = clean_text(text)
    code = language(lang).code
    if ssml or (ssml is None and is_ssml(text)):
        return parse_ssml(text, code, vocab, aliases=aliases, voice_langs=voice_langs)
    return parse_spans(text, code, vocab, aliases=aliases, tags=tags, voice_langs=voice_langs)


def span_voices(spans) -> list[str]:
    """The voices the spans' tags name, each once, in order (the request's voice is not among them)."""
    return list(dict.fromkeys(s.voice for s in spans if isinstance(s, Span) and s.voice is not None))


def phonemize_paragraphs(
    text: str, lang: str = "a", cancel: threading.Event | None = None, lexicon=None
) -> list[list[Word]]:
    """Text -> its paragraphs' Words (blank lines separate paragraphs; empty ones are dropped), read sentence
    by sentence. Raises RequestCancelled between sentences (and inside long ones) once ``cancel`` is set.
    ``text`` may hold overrides (``[word](/phonemes/)``); ``lexicon`` (a
    :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon`) gives the phonemes of its words."""
    paragraphs: dict[int, list[list[Word]]] = {}
    for item in read_text(text, lang, lexicon=lexicon, cancel=cancel):
        if isinstance(item, SentenceWords):
            paragraphs.setdefault(item.paragraph, []).append(item.words)
    return [concat_paragraphs(sentences) for sentences in paragraphs.values()]


def phonemize_words(text: str, lang: str = "a", lexicon=None) -> list[Word]:
    """Text -> its Words (written word or punctuation mark, phonemes, space after), such that
    ``join_words(words).strip() == phonemize(text, lang)``. ``lang``: a one-letter code
    (``a``, ``f``, ...) or an alias (``en-us``, ``fr``, ...; see :mod:`.languages`)."""
    sentences = read_text(text, lang, lexicon=lexicon)
    return concat_paragraphs(item.words for item in sentences if isinstance(item, SentenceWords))


def phonemize(text: str, lang: str = "a", lexicon=None) -> str:
    """Text -> one Kokoro phoneme string (sentences joined by a space). Raises InvalidInputError for
    empty text or an unknown language. Overrides (``[word](/phonemes/)``) and ``lexicon`` words are spoken
    as given; a pause tag, which has no phonemes, separates the words around it by a space."""
    return join_words(phonemize_words(text, lang, lexicon)).strip()
