"""The language table's old address, for the apps that still import it here: the table is
:mod:`kokoro_tvm_ext.speech.languages` now, below markup and sentences, which read it without G2P."""

from kokoro_tvm_ext.speech.languages import (  # noqa: F401
    BY_CODE,
    LANGUAGES,
    Language,
    codes_text,
    known_languages_text,
    language,
    resolve_lang,
    tags_text,
)
