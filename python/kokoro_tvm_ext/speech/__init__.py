"""The speech layer: text in, speech out. Offline weights, 54 voices, G2P for nine languages, and the pipeline.

- :mod:`.speaker`: ``Speaker`` (the one pipeline every front end uses), ``Voice``, ``Speech``;
- the text path, each stage consuming the one before it (:mod:`.text_path` writes the order): :mod:`.markup` (text
  -> spans and pauses), :mod:`.lexicon`, :mod:`.sentences` (where sentences and clauses end, the one definition),
  :mod:`.g2p` (sentences -> phonemes and ``Word``s for all nine languages), :mod:`.chunks` (chunks of at most 510
  tokens, one sentence each: the one chunker); below them :mod:`.languages` and :mod:`.tokens`;
- :mod:`.timestamps`: word timings from durations;
- :mod:`.subtitles`: timings -> .srt/.vtt; :mod:`.audio`: the one audio writer (WAV, FLAC, MP3, Opus, AAC, PCM);
- :mod:`.voices`: the voice packs (names, blends, languages); the weights and the compiled model are the model
  layer's (``kokoro_tvm_ext.model.weights``, ``model.artifact_cache.ensure_artifact``).

Imports the model layer, never the apps.
"""

import warnings
from pathlib import Path

from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.model.weights import Weights, find_weights, load_kmodel
from kokoro_tvm_ext.speech.chunks import FIRST_CHUNK_TOKENS, chunk_phonemes, chunk_text
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.speech.g2p import Word
from kokoro_tvm_ext.speech.languages import LANGUAGES, Language, LanguageMismatchWarning, resolve_lang
from kokoro_tvm_ext.speech.speaker import PlannedChunk, Speaker, Speech, SpeechChunk, SpeechPlan, Voice, join
from kokoro_tvm_ext.speech.text_path import phonemize, phonemize_paragraphs, phonemize_words
from kokoro_tvm_ext.speech.tokens import UnknownPhonemeWarning, count_tokens, tokenize
from kokoro_tvm_ext.speech.voices import (
    DEFAULT_VOICE,
    VoiceInfo,
    list_voices,
    load_voice,
    parse_voice_spec,
    style_for,
    voice_language,
)
from kokoro_tvm_ext.support.errors import AssetError, CorruptAssetError, MissingAssetError

__all__ = [
    "PlannedChunk",
    "Speaker",
    "SpeakerConfig",
    "Speech",
    "SpeechChunk",
    "SpeechPlan",
    "Voice",
    "join",
    "phonemize_paragraphs",
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
    "UnknownPhonemeWarning",
    "VoiceInfo",
    "FIRST_CHUNK_TOKENS",
    "chunk_phonemes",
    "chunk_text",
    "count_tokens",
    "list_voices",
    "load_config",
    "load_voice",
    "parse_voice_spec",
    "phonemize",
    "style_for",
    "tokenize",
]


def _resolve(path=None, *, progress=None) -> Weights:
    weights = find_weights(path)
    weights.ensure_file(progress)
    return weights


def _resolve_weights(path=None) -> Path:
    return find_weights(path).ensure_file()


# The weights' old names here, kept working for users: the weights are the model layer's now.
_DEPRECATED = {
    "ResolvedWeights": (Weights, "kokoro_tvm_ext.model.weights.Weights"),
    "load_model": (load_kmodel, "kokoro_tvm_ext.model.weights.load_kmodel"),
    "resolve": (_resolve, "kokoro_tvm_ext.model.weights.find_weights(path), then its .ensure_file()"),
    "resolve_weights": (_resolve_weights, "kokoro_tvm_ext.model.weights.find_weights(path).ensure_file()"),
}


def __getattr__(name: str):
    if name in _DEPRECATED:
        value, instead = _DEPRECATED[name]
        warnings.warn(f"kokoro_tvm_ext.speech.{name} is deprecated; use {instead}", DeprecationWarning, stacklevel=2)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
