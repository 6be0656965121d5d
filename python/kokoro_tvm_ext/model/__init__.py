"""The model layer: Kokoro-82M on the plugin.

- :mod:`.spec`, :mod:`.config`: the model's constants and its ``config.json`` (vocab included);
- :mod:`.weights`: the float weights (found, rebuilt offline, read, loaded into ``kokoro.KModel``);
- :mod:`.adapters`: PyTorch modules rewritten for export, and the eager reference (torch, compile time);
- :mod:`.compile`: export, import with the plugin's converters, our pass pipeline, build an artifact;
- :mod:`.binding`: a checkpoint's tensors bound to a compiled library (seconds, no compile);
- :mod:`.artifact_cache`: ``ensure_artifact``, artifacts cached per (weights, TVM, plugin, target);
- :mod:`.prebuilt`: libraries shipped for portable x86-64 levels, picked by this CPU;
- :mod:`.runtime`: ``KokoroTVM``, which runs an artifact with numpy and TVM's runtime only.

Knows tokens and style vectors, never text: that is the speech layer's.
"""
