"""The model layer: Kokoro-82M on the plugin.

- :mod:`.spec`, :mod:`.config`: the model's constants and its ``config.json`` (vocab included);
- :mod:`.adapters`: PyTorch modules rewritten for export, and the eager reference (torch, compile time);
- :mod:`.compile`: export, import with the plugin's converters, our pass pipeline, build an artifact;
- :mod:`.artifact_cache`: artifacts cached per (weights, TVM, plugin, CPU);
- :mod:`.runtime`: ``KokoroTVM``, which runs an artifact with numpy and TVM's runtime only.

Knows tokens and style vectors, never text: that is the speech layer's.
"""
