"""spaCy's English tokenizer (what ``spacy.blank('en')`` does to text) without importing spaCy.

``import spacy`` and its blank pipeline take ~0.4 s (its CLI, thinc, confection, pydantic), a quarter of a
cold ``say``, for a tokenizer that is a handful of regular expressions and a table of exceptions. Those are
read from the installed spaCy once (:func:`extract_rules`, the only place that imports it) into the user
cache, one JSON file per spaCy version, and this module runs spaCy's algorithm over them
(``Tokenizer.__call__`` in spaCy's tokenizer.pyx):

1. the text is cut at whitespace: a single space after a token becomes that token's trailing space,
   other whitespace runs are tokens of their own;
2. each run is a special case (``don't`` -> ``do`` ``n't``) or has prefixes and suffixes peeled off, one of
   each per round, until none is left or the rest is a special case; the rest is a URL, or is cut at its
   infixes (hyphens, slashes);
3. a pass over the tokens replaces each sequence that spells a special case containing affixes or a
   space (``:)`` as ``:`` ``)``) by that case's tokens, longest first.

Tokens carry what the tagger in :mod:`.english` reads: text, trailing space and spaCy's English
``like_num``. tests/speech/test_english_corpus.py holds this to spaCy's own tokens on 2,400 sentences.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import metadata

from kokoro_tvm_ext.support.cache import atomic_write, cache_dir
from kokoro_tvm_ext.support.torch_free import torch_hidden

EAGER = ("prefix", "suffix", "token_match")  # compiled at once: every word is peeled (English has no token_match)
LAZY = ("url_match", "infix")  # compiled on the first word that needs them
RULES_FORMAT = 1  # bump when the cached file's layout changes
_RULE_KEYS = {"patterns", "specials", "phrases", "number_words", "ordinal_words"}


@dataclass(slots=True)
class Token:
    text: str
    whitespace_: str  # " " when a space follows (spaCy's name)
    like_num: bool
    tag_: str = ""  # set by the tagger

    @property
    def is_space(self) -> bool:
        return self.text.isspace()


def rules_path():
    return cache_dir(create=False) / "g2p" / f"spacy-{metadata.version('spacy')}-en-tokenizer-v{RULES_FORMAT}.json"


_spacy_lock = threading.Lock()
_rules_lock = threading.Lock()


def blank_english():
    """``spacy.blank("en")``, without what spaCy loads for trained pipelines only.

    Importing spaCy imports torch through thinc when torch is installed, and every new
    pipeline imports all pipeline factories that installed packages register as entry
    points (spacy-curated-transformers, which misaki[en] installs, pulls in transformers
    and torch): ~3 s and ~500 MB for a tokenizer that needs neither.
    """

    with torch_hidden():
        import spacy
        from spacy.util import registry

    factories = registry._entry_point_factories  # spaCy's catalogue registry of entry-point factories
    with _spacy_lock:
        factories.entry_points, before = False, factories.entry_points
        try:
            return spacy.blank("en")
        finally:
            factories.entry_points = before


def extract_rules() -> dict:
    """The rules of ``spacy.blank('en')``'s tokenizer as plain data (imports spaCy, ~1 s)."""
    tokenizer = blank_english().tokenizer
    pattern = {
        "prefix": tokenizer.prefix_search,
        "suffix": tokenizer.suffix_search,
        "infix": tokenizer.infix_finditer,
        "token_match": tokenizer.token_match,
        "url_match": tokenizer.url_match,
    }
    # spaCy's rules are {string: [{ORTH: piece, NORM: ...}]}; only the pieces change the tokens
    from spacy.attrs import ORTH
    from spacy.lang.en import lex_attrs

    specials = {string: [piece[ORTH] for piece in pieces] for string, pieces in tokenizer.rules.items()}
    rules = {
        "patterns": {
            name: None if search is None else [search.__self__.pattern, search.__self__.flags]
            for name, search in pattern.items()
        },
        "specials": specials,
        # like_num's word lists (spaCy's English lexical attributes)
        "number_words": sorted(lex_attrs._num_words),
        "ordinal_words": sorted(lex_attrs._ordinal_words),
    }
    # The special cases that step 3 looks for, as the token sequences steps 1-2 make of them without special
    # cases: spaCy's faster_heuristics keep those with a prefix, suffix, infix or space (spaCy answers which).
    without_specials = EnglishTokenizer({**rules, "specials": {}, "phrases": {}})
    rules["phrases"] = {
        string: [t.text for t in without_specials(string)]
        for string in specials
        if not tokenizer.faster_heuristics
        or tokenizer.find_prefix(string)
        or tokenizer.find_suffix(string)
        or tokenizer.find_infix(string)
        or " " in string
    }
    return rules


@lru_cache(maxsize=1)
def load_rules() -> dict:
    """The cached rules, extracted first if this spaCy's are not in the cache yet."""
    path = rules_path()
    with _rules_lock:
        try:
            rules = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(rules, dict) and rules.keys() >= _RULE_KEYS:
                return rules
        except (OSError, ValueError):
            pass
        rules = extract_rules()
        try:
            with atomic_write(path, "w") as f:
                json.dump(rules, f, ensure_ascii=False)
        except OSError:
            pass  # a read-only cache: extract again next time
        return rules


class EnglishTokenizer:
    """``EnglishTokenizer(load_rules())(text)`` -> the Tokens ``spacy.blank('en')(text)`` has."""

    def __init__(self, rules: dict) -> None:
        patterns = rules["patterns"]
        compiled = {name: None if patterns[name] is None else re.compile(*patterns[name]) for name in EAGER}
        self.prefix = compiled["prefix"]
        self.suffix = compiled["suffix"]
        self.token_match = compiled["token_match"] and compiled["token_match"].match
        # The infix and URL patterns only matter inside a word with a mark in it (a hyphen, a dot, a slash):
        # compiled when such a word first comes (~40 ms of a cold `say` of plain words).
        self._lazy_patterns = {name: patterns[name] for name in LAZY}
        self.specials: dict[str, list[str]] = rules["specials"]
        self.phrases_by_first: dict[str, list[tuple[str, ...]]] = {}
        for pieces in rules["phrases"].values():
            self.phrases_by_first.setdefault(pieces[0], []).append(tuple(pieces))
        self.number_words = frozenset(rules["number_words"])
        self.ordinal_words = frozenset(rules["ordinal_words"])
        # a run's tokens depend on the run alone: remembered, as spaCy's tokenizer does (most words recur)
        self._span = lru_cache(maxsize=10_000)(self._span_tokens)

    def __call__(self, text: str) -> list[Token]:
        pieces: list[list] = []  # [text, space after]
        for run in re.finditer(r"\s+|\S+", text):  # \s is str.isspace, as spaCy's split
            span = run.group()
            if span[0].isspace() and pieces and span[0] == " ":
                pieces[-1][1] = True  # the single space after a token is its trailing space
                span = span[1:]
            if span:
                pieces.extend([p, False] for p in self._span(span))
        pieces = self._join_phrases(pieces)
        return [Token(t, " " if space else "", self.like_num(t)) for t, space in pieces]

    # -- steps 1-2: one whitespace-free run (or whitespace run) -----------------------------------
    def _span_tokens(self, span: str) -> tuple[str, ...]:
        if span in self.specials:
            return tuple(self.specials[span])
        prefixes: list[str] = []
        suffixes: list[str] = []
        rest = self._peel(span, prefixes, suffixes)
        return (*prefixes, *self._core(rest), *suffixes[::-1])

    def _peel(self, string: str, prefixes: list[str], suffixes: list[str]) -> str:
        """Peel a prefix and a suffix per round (spaCy's ``_split_affixes``, quirks included: a special
        case found after removing one affix stops the peeling at once)."""
        specials = self.specials
        last_size = 0
        while string and len(string) != last_size:
            if (self.token_match and self.token_match(string)) or string in specials:
                break
            last_size = len(string)
            pre_len = _length(self.prefix.search(string))
            if pre_len:
                prefix, minus_pre = string[:pre_len], string[pre_len:]
                if minus_pre and minus_pre in specials:
                    prefixes.append(prefix)
                    return minus_pre
            suf_len = _length(self.suffix.search(string[pre_len:]))
            if suf_len:
                suffix, minus_suf = string[-suf_len:], string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    suffixes.append(suffix)
                    return minus_suf
            if pre_len and suf_len and pre_len + suf_len <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        return string

    @cached_property
    def _url_and_infix(self) -> tuple:
        """(url_match: a ``match`` or None, infix: a compiled pattern)."""
        url, infix = (None if p is None else re.compile(*p) for p in self._lazy_patterns.values())
        return url and url.match, infix

    def _core(self, string: str) -> list[str]:
        """What is left after the affixes: a special case, a URL, or cut at its infixes."""
        if not string:
            return []
        if string in self.specials:
            return list(self.specials[string])
        if self.token_match and self.token_match(string):
            return [string]
        if string.isalnum():  # neither a URL nor an infix is letters and digits alone
            return [string]
        url_match, infix = self._url_and_infix
        if url_match and url_match(string):
            return [string]
        out, start = [], 0
        for match in infix.finditer(string):
            infix_start, infix_end = match.span()
            if infix_start == 0:  # an infix at the very start is not a split
                continue
            if infix_start != start:
                out.append(string[start:infix_start])
            if infix_start != infix_end:
                out.append(string[infix_start:infix_end])
            start = infix_end
        if string[start:]:
            out.append(string[start:])
        return out

    # -- step 3: special cases that the affix rules cut apart ----------------------------------------
    def _join_phrases(self, pieces: list[list]) -> list[list]:
        texts = [t for t, _ in pieces]
        found = []
        for start, first in enumerate(texts):
            for phrase in self.phrases_by_first.get(first, ()):
                end = start + len(phrase)
                if tuple(texts[start:end]) == phrase:
                    found.append((start, end))
        if not found:
            return pieces
        # spaCy's filter: longest first, then leftmost; a span is kept when its first and last tokens are
        # not in a span seen before (kept or not)
        seen: set[int] = set()
        kept = []
        for start, end in sorted(found, key=lambda s: (s[0] - s[1], s[0])):
            if start not in seen and end - 1 not in seen:
                kept.append((start, end))
            seen.update(range(start, end))
        out: list[list] = []
        done = 0
        for start, end in sorted(kept):
            out.extend(pieces[done:start])
            written = "".join(t + (" " if space else "") for t, space in pieces[start : end - 1]) + texts[end - 1]
            if written in self.specials:  # spelled with the case's own spacing: its tokens
                out.extend([p, False] for p in self.specials[written])
                out[-1][1] = pieces[end - 1][1]
            else:
                out.extend(pieces[start:end])
            done = end
        out.extend(pieces[done:])
        return out

    def like_num(self, text: str) -> bool:
        """spaCy's English ``like_num``: digits (signs, commas and points allowed), a fraction, a number
        word or ordinal word, or digits with an ordinal suffix."""
        if text.startswith(("+", "-", "±", "~")):
            text = text[1:]
        text = text.replace(",", "").replace(".", "")
        if text.isdigit():
            return True
        if text.count("/") == 1:
            num, denom = text.split("/")
            if num.isdigit() and denom.isdigit():
                return True
        lower = text.lower()
        if lower in self.number_words or lower in self.ordinal_words:
            return True
        return lower.endswith(("st", "nd", "rd", "th")) and lower[:-2].isdigit()


def _length(match) -> int:
    return match.end() - match.start() if match is not None else 0


@lru_cache(maxsize=1)
def english_tokenizer() -> EnglishTokenizer:
    """The tokenizer over this spaCy's cached rules (built once, then shared)."""
    return EnglishTokenizer(load_rules())
