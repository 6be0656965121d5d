"""Which language a request is spoken in, and its words: the server's one language lookup.

Kokoro voices carry their language in the first letter of their name (``a`` US
English, ``b`` British English, ``j`` Japanese, ...), as Kokoro-FastAPI reads it;
``lang_code`` overrides it. Both go through the assets package, which owns the languages.
"""

from __future__ import annotations


def speech_language(voice_names: list[str], lang_code: str | None) -> str:
    """The G2P language for a request: ``lang_code`` (a one-letter code or an alias such as
    ``en-gb``), else the first voice's letter. ValueError names the known languages."""
    from ..assets import resolve_lang, voice_language

    if lang_code is not None:
        return resolve_lang(lang_code)
    return voice_language(voice_names[0])


def words(text: str, lang: str):
    """The text's words with their phonemes (``assets.phonemize_words``)."""
    from ..assets import phonemize_words

    return phonemize_words(text, lang)
