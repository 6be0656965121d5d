"""The nine languages Kokoro-82M speaks: one-letter codes, aliases, and which G2P reads each.

The codes are hexgrad's KPipeline ``lang_code`` letters, which are also the first letter of
every voice name (``af_heart`` is American English, ``zf_xiaobei`` Mandarin). The aliases are
the ones Kokoro users type (``en-us``, ``pt-br``, ...): KPipeline's own plus ``fr`` and
``en``/``pt``/``zh-cn``/``cmn`` shorthands.

The base of the text path: markup, sentences, G2P and the chunker all read this table, so it imports none of them.
"""

from __future__ import annotations

import difflib
import re
import warnings
from dataclasses import dataclass

from kokoro_tvm_ext.support.errors import InputWarning, InvalidInputError

# What each G2P reads natively (a regex character class); text with none of it is probably in another language.
LATIN = r"A-Za-z0-9"
LATIN_EXTENDED = r"A-Za-zÀ-ɏ0-9"
DEVANAGARI = r"\u0900-\u097F0-9"
JAPANESE = r"\u3040-\u30FF\u4E00-\u9FFF\uFF66-\uFF9F0-9０-９"
HAN = r"\u4E00-\u9FFF0-9"


@dataclass(frozen=True)
class Language:
    """One row per language: everything else (G2P dispatch, voices, help texts, the server) reads this table,
    so a language of an existing G2P family is one row here plus its test row."""

    code: str  # KPipeline's one-letter lang_code, and the first letter of its voices
    name: str
    aliases: tuple[str, ...]  # the first one is the canonical tag (``en-us``, ``pt-br``, ...)
    g2p: str  # "misaki-en", "espeak", "misaki-ja" or "misaki-zh"
    espeak_voice: str | None = None  # the espeak-ng language KPipeline passes to EspeakG2P
    script: str = LATIN_EXTENDED  # the characters its G2P reads
    spaced: bool = True  # written with spaces between words (lexicon entries match whole words)

    @property
    def tag(self) -> str:
        return self.aliases[0]


LANGUAGES: tuple[Language, ...] = (
    Language("a", "American English", ("en-us", "en"), "misaki-en", script=LATIN),
    Language("b", "British English", ("en-gb",), "misaki-en", script=LATIN),
    Language("e", "Spanish", ("es",), "espeak", "es"),
    Language("f", "French", ("fr", "fr-fr"), "espeak", "fr-fr"),
    Language("h", "Hindi", ("hi",), "espeak", "hi", script=DEVANAGARI),
    Language("i", "Italian", ("it",), "espeak", "it"),
    Language("j", "Japanese", ("ja",), "misaki-ja", script=JAPANESE, spaced=False),
    Language("p", "Brazilian Portuguese", ("pt-br", "pt"), "espeak", "pt-br"),
    Language("z", "Mandarin Chinese", ("zh", "zh-cn", "cmn"), "misaki-zh", script=HAN, spaced=False),
)
BY_CODE = {lang.code: lang for lang in LANGUAGES}
_LOOKUP = {key: lang for lang in LANGUAGES for key in (lang.code, *lang.aliases)}


def codes_text() -> str:
    """``a b e ...``: every code, for help texts."""
    return " ".join(lang.code for lang in LANGUAGES)


def tags_text() -> str:
    """``en-us en-gb es ...``: every canonical tag, for help texts."""
    return " ".join(lang.tag for lang in LANGUAGES)


def known_languages_text() -> str:
    return ", ".join(f"{lang.code} ({lang.tag}, {lang.name})" for lang in LANGUAGES)


def resolve_lang(lang: str) -> str:
    """A one-letter code or an alias (any case, ``_`` or ``-``) -> the one-letter code.
    Raises InvalidInputError naming the known languages."""
    key = lang.strip().lower().replace("_", "-") if isinstance(lang, str) else None
    if key in _LOOKUP:
        return _LOOKUP[key].code
    close = difflib.get_close_matches(key or "", list(_LOOKUP), n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise InvalidInputError(f"unknown language {lang!r}{hint}; known languages: {known_languages_text()}")


def language(lang: str) -> Language:
    return BY_CODE[resolve_lang(lang)]


class LanguageMismatchWarning(InputWarning):
    """The text has no characters the chosen language's G2P reads as that language."""


def warn_if_foreign(written: str, lang: Language, stacklevel: int = 2) -> None:
    """A :class:`LanguageMismatchWarning` when ``written`` has none of ``lang``'s script."""
    if not re.search(f"[{lang.script}]", written):
        warnings.warn(
            f"the text has no {lang.name} characters, so {lang.name} G2P may read little or none of it; "
            f"pick its language with --lang (or lang=...) or a voice of that language. Known languages: "
            f"{known_languages_text()}",
            LanguageMismatchWarning,
            stacklevel=stacklevel + 1,
        )
