"""A user's pronunciation lexicon: words -> phonemes per language, which win over the G2P.

The file is plain text, one entry per line, three fields separated by tabs::

    # language <TAB> word <TAB> phonemes        (# starts a comment; blank lines are skipped)
    en-us	Kokoro	kˈOkəɹO
    a,b	TVM	tˌivˌiˈɛm
    fr	Kokoro	/kokoʁo/

The language is a code or alias (``a``, ``en-us``, ``fr``, ...; several separated by commas); the word may
be several words (``New York``); the phonemes may be written between slashes, as in the inline syntax.

Matching: an entry matches the word as written; an entry written in lowercase also matches it in any case
(``kokoro`` matches Kokoro and KOKORO, ``US`` matches only US). Where entries overlap, the longest wins. In
languages written with spaces between words an entry matches whole words only; in Japanese and Mandarin
anywhere in the text. Inline overrides (``[word](/phonemes/)``) win over the lexicon.

In the text path (:mod:`.text_path`) it works on markup's spans, before the sentence splitter: each span's words in
its language.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from kokoro_tvm_ext.speech.languages import BY_CODE, known_languages_text, resolve_lang
from kokoro_tvm_ext.speech.markup import Override, Pause, Span, check_phonemes
from kokoro_tvm_ext.support.errors import InvalidInputError


@dataclass(frozen=True)
class Lexicon:
    """Entries per one-letter language code: {word as written: phonemes}. Picklable (a book's Ray workers
    get it with each unit)."""

    entries: dict[str, dict[str, str]] = field(default_factory=dict)
    source: str = "lexicon"

    @classmethod
    def load(cls, path: str | Path, vocab: dict[str, int] | None = None) -> Lexicon:
        """Read a lexicon file; InvalidInputError naming ``file:line`` for the first malformed line."""
        path = Path(path).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InvalidInputError(f"lexicon {path}: no such file") from None
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"lexicon {path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        return cls.parse(text, str(path), vocab)

    @classmethod
    def parse(cls, text: str, source: str = "lexicon", vocab: dict[str, int] | None = None) -> Lexicon:
        entries: dict[str, dict[str, str]] = {}
        lines: dict[tuple[str, str], int] = {}
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{source}:{number}"
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = [f.strip() for f in line.split("\t")]
            if len(fields) != 3:
                found = f"{len(fields)} fields" if len(fields) > 1 else "no tab"
                raise InvalidInputError(
                    f"{where}: expected language<TAB>word<TAB>phonemes, found {found}: {_shorten(line)!r}"
                )
            langs, word, phonemes = fields
            if not word:
                raise InvalidInputError(f"{where}: the word is empty")
            codes = []
            for lang in langs.split(","):
                try:
                    codes.append(resolve_lang(lang))
                except InvalidInputError:
                    raise InvalidInputError(
                        f"{where}: unknown language {lang.strip()!r}; known languages: {known_languages_text()}"
                    ) from None
            if len(phonemes) > 1 and phonemes.startswith("/") and phonemes.endswith("/"):
                phonemes = phonemes[1:-1]
            phonemes = check_phonemes(phonemes, vocab, f"{where}: the phonemes of {word!r}")
            word = " ".join(word.split())
            for code in codes:
                if (code, word) in lines:
                    raise InvalidInputError(
                        f"{where}: {word!r} is already in the lexicon for {BY_CODE[code].name} "
                        f"(line {lines[code, word]}); keep one"
                    )
                lines[code, word] = number
                entries.setdefault(code, {})[word] = phonemes
        return cls(entries, source)

    def __len__(self) -> int:
        return sum(len(words) for words in self.entries.values())

    @property
    def digest(self) -> str:
        """A hash of the entries (a book's finished chapters are spoken again when it changes)."""
        blob = "\n".join(
            f"{lang}\t{w}\t{p}" for lang in sorted(self.entries) for w, p in sorted(self.entries[lang].items())
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def lookup(self, word: str, lang: str) -> str | None:
        """The phonemes for ``word`` as written in language ``lang`` (a one-letter code), or None."""
        words = self.entries.get(lang, {})
        if word in words:
            return words[word]
        lower = word.lower()
        return words[lower] if lower in words else None

    def apply(self, spans: Iterable[Span | Pause]) -> list[Span | Pause]:
        """Markup's spans with the lexicon's words made :class:`Override` s, each in its span's language
        (overrides and pauses kept)."""
        return [
            replace(item, segments=self._applied(item.segments, item.lang)) if isinstance(item, Span) else item
            for item in spans
        ]

    def _applied(self, segments: Iterable[str | Override], lang: str) -> tuple[str | Override, ...]:
        pattern = self._patterns.get(lang)
        if pattern is None:
            return tuple(segments)
        out: list[str | Override] = []
        for seg in segments:
            if isinstance(seg, Override):
                out.append(seg)
                continue
            end = 0
            for m in pattern.finditer(seg):
                written = " ".join(m.group().split())
                phonemes = self.lookup(written, lang)
                if phonemes is None:  # matched only by case, and the entry is not lowercase
                    continue
                if m.start() > end:
                    out.append(seg[end : m.start()])
                out.append(Override(written, phonemes))
                end = m.end()
            if end < len(seg):
                out.append(seg[end:])
        return tuple(out)

    @cached_property
    def _patterns(self) -> dict[str, re.Pattern]:
        patterns = {}
        for lang, words in self.entries.items():
            # longest first: regex alternation takes the first that matches
            alternatives = "|".join(_word_pattern(w) for w in sorted(words, key=len, reverse=True))
            bounded = f"(?:{alternatives})" if not BY_CODE[lang].spaced else rf"(?<!\w)(?:{alternatives})(?!\w)"
            patterns[lang] = re.compile(bounded, re.IGNORECASE)
        return patterns


def _word_pattern(word: str) -> str:
    return r"\s+".join(re.escape(part) for part in word.split())  # a line break may fall between its words


def _shorten(text: str, limit: int = 50) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def load_lexicon(lexicon: Lexicon | str | Path | None, vocab: dict[str, int] | None = None) -> Lexicon | None:
    """A :class:`Lexicon`, a path to one, or None."""
    if lexicon is None or isinstance(lexicon, Lexicon):
        return lexicon
    return Lexicon.load(lexicon, vocab)
