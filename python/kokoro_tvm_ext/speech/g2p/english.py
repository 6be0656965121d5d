"""English (``a`` American, ``b`` British) text -> Kokoro phonemes, offline, word by word.

misaki's English G2P (the one hexgrad's KPipeline uses for ``lang_code='a'``/``'b'``) normally
loads spaCy's ``en_core_web_sm`` and downloads it when missing. That model is not on PyPI,
so here misaki gets ``spacy.blank('en')`` (the same tokenizer rules) plus a small rule-based
Penn Treebank tagger instead. The tags matter in a few places: punctuation, numbers and
currency, ``a``/``the``/``to``/``I``, and noun/verb heteronyms (``to record`` vs
``a record``); the rules cover these common cases, not full POS accuracy.
Out-of-vocabulary words go to espeak-ng (bundled by ``espeakng_loader``) through misaki's
``EspeakFallback``, as in KPipeline. Everything else is misaki unchanged: ``unk=''``.

Words come from misaki's own tokens (text, phonemes, whitespace), exactly as KPipeline
joins them into a chunk's phoneme string.
"""

from __future__ import annotations

import re
import threading
import warnings
from functools import lru_cache

from kokoro_tvm_ext.speech.g2p.words import Word, words_from_pieces

# ---------------------------------------------------------------------------------------
# Rule-based tagging for spaCy's blank English pipeline

_PUNCT_TAGS = {
    ".": ".",
    "!": ".",
    "?": ".",
    ",": ",",
    ";": ":",
    ":": ":",
    "-": ":",
    "–": ":",
    "—": ":",
    "--": ":",
    "…": ":",
    "...": ":",
    "(": "-LRB-",
    "[": "-LRB-",
    "{": "-LRB-",
    ")": "-RRB-",
    "]": "-RRB-",
    "}": "-RRB-",
    "“": "``",
    "‘": "``",
    "”": "''",
    "’": "''",
    "#": "#",
    "$": "$",
    "£": "$",
    "€": "$",
}
_CLOSED_CLASS = {
    "DT": "a an the this these those every each some any no another all both either neither",
    "PRP": "i you he she it we they me him us them myself yourself himself herself itself ourselves themselves",
    "PRP$": "my your his its our their",
    "IN": "of in on at by for with from about as into like through after over between against during without "
    "before under around among because if while than upon within since until although though whether",
    "TO": "to",
    "CC": "and or but nor",
    "MD": "can could will would shall should may might must",
    "WDT": "which whatever",
    "WP": "who whom what whose",
    "WRB": "when where why how",
    "VBZ": "is has does",
    "VBP": "are am have do",
    "VBD": "was were had did",
    "VB": "be",
    "VBN": "been",
    "VBG": "being",
    "RB": "not never very too also just only often always already soon then now here",
}
_CLOSED = {w: tag for tag, words in _CLOSED_CLASS.items() for w in words.split()}
_THIRD_PERSON = {"he", "she", "it"}
_NUMBER = re.compile(r"^[+-]?(\d[\d,]*)(\.\d+)?%?$")
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th)$", re.IGNORECASE)


def _tag_token(tok, prev_tag: str | None, prev_lower: str | None, sentence_start: bool) -> str:
    text = tok.text
    lower = text.lower()
    if tok.is_space:
        return "_SP"
    if text in ("-", "–") and tok.i > 0 and not tok.whitespace_ and not tok.nbor(-1).whitespace_:
        return "HYPH"  # inside a word ("open-weight"), not a dash
    if text in _PUNCT_TAGS:
        return _PUNCT_TAGS[text]
    if text == "'":
        return "''"
    if _NUMBER.match(text) or tok.like_num:
        return "CD"
    if _ORDINAL.match(text):
        return "JJ"
    if text in ("'s", "’s"):
        return "POS" if prev_tag and prev_tag.startswith("NN") else "VBZ"
    if lower in ("n't", "not"):
        return "RB"
    if lower in _CLOSED:
        return _CLOSED[lower]
    if not any(c.isalpha() for c in text):
        return "NFP" if not any(c.isdigit() for c in text) else "CD"
    if prev_tag in ("TO", "MD"):
        return "VB"
    if prev_tag == "PRP" and prev_lower in _THIRD_PERSON:
        return "VBD" if lower.endswith("ed") else "VBZ"
    if prev_tag == "PRP" and prev_lower not in ("me", "him", "us", "them"):
        return "VBD" if lower.endswith("ed") else "VBP"
    if text[0].isupper() and not sentence_start and not text.isupper():
        return "NNP"
    if lower.endswith("ing") and len(lower) > 4:
        return "VBG"
    if lower.endswith("ed") and len(lower) > 3:
        return (
            "VBN"
            if prev_tag in ("VBZ", "VBP", "VBD") and prev_lower in ("has", "have", "had", "is", "are", "was", "were")
            else "VBD"
        )
    if lower.endswith("ly") and len(lower) > 3:
        return "RB"
    if text.isupper() and len(text) > 1:
        return "NNP"
    return "NNS" if lower.endswith("s") and not lower.endswith("ss") and prev_tag in ("DT", "JJ", "CD") else "NN"


def _blank_english():
    """``spacy.blank("en")``, without what spaCy loads for trained pipelines only.

    Importing spaCy imports torch through thinc when torch is installed, and every new
    pipeline imports all pipeline factories that installed packages register as entry
    points (spacy-curated-transformers, which misaki[en] installs, pulls in transformers
    and torch): ~3 s and ~500 MB for a tokenizer that needs neither.
    """
    from kokoro_tvm_ext.support.torch_free import torch_hidden

    with torch_hidden():
        import spacy
        from spacy.util import registry

    factories = registry._entry_point_factories  # spaCy's catalogue registry of entry-point factories
    with _lock:
        factories.entry_points, before = False, factories.entry_points
        try:
            return spacy.blank("en")
        finally:
            factories.entry_points = before


class _RuleTaggedBlankEnglish:
    """Callable like a spaCy pipeline: tokenizes with ``spacy.blank('en')``, then sets ``tag_``."""

    def __init__(self) -> None:
        self.nlp = _blank_english()

    def __call__(self, text: str):
        doc = self.nlp(text)
        prev_tag = prev_lower = None
        sentence_start = True
        quote_open = False
        for tok in doc:
            if tok.text == '"':  # straight quotes alternate: opening (``) then closing ('')
                tag = "''" if quote_open else "``"
                quote_open = not quote_open
            else:
                tag = _tag_token(tok, prev_tag, prev_lower, sentence_start)
            tok.tag_ = tag
            if tag == "_SP":
                continue
            if tag == ".":
                sentence_start = True
            elif tag not in ("``", "-LRB-"):
                sentence_start = False
            prev_tag, prev_lower = tag, tok.text.lower()
        return doc


# ---------------------------------------------------------------------------------------
# misaki's G2P, built without en_core_web_sm

_lock = threading.Lock()


@lru_cache(maxsize=2)
def _espeak_fallback(british: bool = False):
    try:
        from misaki import espeak  # sets espeak-ng's library and data from espeakng_loader

        return espeak.EspeakFallback(british=british)
    except Exception as err:  # noqa: BLE001 - G2P still works, just without OOV words
        warnings.warn(
            f"espeak-ng fallback unavailable ({type(err).__name__}: {err}); words missing from misaki's "
            "lexicon will be skipped. Install it with: pip install espeakng-loader phonemizer-fork",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


class _FallbackOnFirstUse:
    """misaki's fallback for words its lexicon lacks, set up on the first such word:
    espeak-ng's setup (phonemizer and its imports) takes ~0.3 s that text within the
    lexicon never needs. Without espeak-ng, such words are skipped, as misaki does."""

    def __init__(self, british: bool) -> None:
        self.british = british

    def __call__(self, token):
        fallback = _espeak_fallback(self.british)
        return fallback(token) if fallback is not None else (None, None)


@lru_cache(maxsize=2)
def english_g2p(british: bool = False):
    """misaki's English ``G2P`` (US, or British with ``british=True``) with the offline
    pipeline (built once per variant, then shared)."""
    from kokoro_tvm_ext.support.torch_free import torch_hidden

    with torch_hidden():  # misaki.en imports spaCy (and thinc) at module level
        from misaki import en

    class OfflineG2P(en.G2P):
        def __init__(self) -> None:  # noqa: D401 - deliberately not en.G2P.__init__ (it downloads)
            self.version = None
            self.british = british
            self.nlp = _RuleTaggedBlankEnglish()
            self.lexicon = en.Lexicon(british)
            self.fallback = _FallbackOnFirstUse(british)
            self.unk = ""

    with warnings.catch_warnings():  # misaki's Lexicon reads its dictionaries with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        return OfflineG2P()


# spaCy's tokenizer peels suffixes (punctuation, emoji) off a whitespace-free run one at a time, each a
# search over the rest: quadratic (4,000 emoji took 3 s). Longer runs than this (no English word is) are cut.
MAX_RUN = 100
_LONG_RUN = re.compile(rf"\S{{{MAX_RUN}}}(?=\S)")


def paragraph_words(paragraph, lang: str = "a") -> list[Word]:
    """One paragraph -> Words from misaki's tokens (``lang`` is ``a`` or ``b``). ``paragraph``: a str, or
    text and overrides, which misaki reads itself in its own syntax (``[word](/phonemes/)``): it then
    reads the words around an override knowing its phonemes (``the`` before a vowel)."""
    g2p = english_g2p(british=lang == "b")
    if isinstance(paragraph, str):
        paragraph = _LONG_RUN.sub(lambda run: run.group() + " ", paragraph)
    else:
        paragraph = "".join(
            _LONG_RUN.sub(lambda run: run.group() + " ", s) if isinstance(s, str) else f"[{s.text}](/{s.phonemes}/)"
            for s in paragraph
        )
    with _lock:  # misaki keeps per-call state on its tokens; spaCy's vocab is shared
        _, tokens = g2p(paragraph)
        pieces = [(tk.text, tk.phonemes or "", bool(tk.whitespace)) for tk in tokens]
    return words_from_pieces(pieces)
