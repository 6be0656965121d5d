"""The speech layer: text in, speech out. Offline weights, 54 voices, G2P for nine languages, and the pipeline.

- :mod:`.speaker`: ``Speaker`` (the one pipeline every front end uses), ``Voice``, ``Speech``;
- :mod:`.g2p`: text -> phonemes and ``Word``s for all nine languages, tokens;
- :mod:`.chunks`: words -> chunks of at most 510 tokens; :mod:`.timestamps`: word timings from durations;
- :mod:`.subtitles`: timings -> .srt/.vtt; :mod:`.encoders`: audio -> WAV, MP3, Opus, AAC, FLAC, PCM;
- :mod:`.assets`: where weights and voices come from; :mod:`.artifact`: the compiled model for the weights.

Imports the model layer, never the apps.
"""

from kokoro_tvm_ext.errors import AssetError, CorruptAssetError, MissingAssetError
from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.speech.assets.voices import (
    DEFAULT_VOICE,
    VoiceInfo,
    list_voices,
    load_voice,
    parse_voice_spec,
    style_for,
    voice_language,
)
from kokoro_tvm_ext.speech.assets.weights import ResolvedWeights, load_model, resolve, resolve_weights
from kokoro_tvm_ext.speech.g2p import (
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
    phonemize_paragraphs,
    phonemize_words,
    resolve_lang,
    tokenize,
)
from kokoro_tvm_ext.speech.speaker import PlannedChunk, Speaker, Speech, SpeechChunk, SpeechPlan, Voice, join

__all__ = [
    "PlannedChunk",
    "Speaker",
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
