"""Voices: Kokoro's style packs, by name or blend, and the language a voice speaks.

- :mod:`.packs`: list the voices, load one by name or as a weighted blend, pick the style row;
- voice files of your own (``NAME.npy`` + ``NAME.json``, in a voices directory or by path), in :mod:`.packs`;
- :mod:`.sdist`: the 54 packs of hexgrad's kokoro 0.9.4 sdist, verified, in the user cache.

The HuggingFace cache's packs are found by the model layer's lookup (``model/weights/hf_cache.py``).
"""

from kokoro_tvm_ext.speech.voices.packs import (
    DEFAULT_VOICE,
    VOICES_ENV,
    VoiceInfo,
    add_voice_dir,
    list_voices,
    load_voice,
    parse_voice_spec,
    read_sidecar,
    save_voice,
    style_for,
    voice_language,
)

__all__ = [
    "DEFAULT_VOICE",
    "VOICES_ENV",
    "VoiceInfo",
    "add_voice_dir",
    "list_voices",
    "load_voice",
    "parse_voice_spec",
    "read_sidecar",
    "save_voice",
    "style_for",
    "voice_language",
]
