"""Resemblyzer's GE2E speaker encoder on the plugin (numpy front end, compiled LSTM), without torch.

- :mod:`.spec`: its hyperparameters and weight shapes;
- :mod:`.pt_reader`: ``torch.save`` files read without torch;
- :mod:`.weights`: the weights, fetched from Resemblyzer's wheel once and cached as safetensors;
- :mod:`.preprocess`: resampling, volume, silence trim;
- :mod:`.frontend`: mel spectrogram and partial windows;
- :mod:`.network`: the network as a Relax module, from the numpy weights;
- :mod:`.compile`: its compiled artifact, cached;
- :mod:`.runtime`: the artifact run by TVM's runtime;
- :mod:`.encoder`: :class:`SpeakerEncoder` (``load``, ``embed``, ``embed_many``).
"""

from kokoro_tvm_ext.model.speaker_encoder.encoder import SpeakerEncoder

__all__ = ["SpeakerEncoder"]
