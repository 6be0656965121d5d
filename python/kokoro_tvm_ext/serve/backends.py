"""What runs the model: the compiled artifact, or PyTorch eager KModel for comparison.

Both take a batch of chunks and yield one ``(audio float32, durations int64)`` per
chunk, in order, each as soon as it is ready; durations in frames per token id
including both boundary ids. Only the scheduler's worker thread calls ``iter_batch``.
"""

from __future__ import annotations

from pathlib import Path

from ..model_spec import MAX_TOKENS, SAMPLE_RATE


class TvmBackend:
    name = "tvm"

    def __init__(self, artifact: str | Path, num_threads: int | None = None):
        from ..runtime import KokoroTVM

        self.runtime = KokoroTVM(artifact, num_threads=num_threads)
        self.sample_rate = self.runtime.sample_rate
        self.max_tokens = self.runtime.max_tokens

    def iter_batch(self, tokens_list, styles, speeds, seeds):
        return self.runtime.iter_batch(tokens_list, styles, speeds, seeds)


class TorchBackend:
    """hexgrad's KModel in PyTorch eager, fed the same noise as the artifact (``kokoro.reference``)."""

    name = "torch"

    def __init__(self, weights=None, num_threads: int | None = None):
        import torch

        from ..assets import load_model

        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.model = load_model(weights)
        self.sample_rate = SAMPLE_RATE
        self.max_tokens = MAX_TOKENS

    def iter_batch(self, tokens_list, styles, speeds, seeds):
        from ..kokoro.reference import reference

        for t, s, v, n in zip(tokens_list, styles, speeds, seeds):
            yield reference(self.model, t, s, speed=v, noise_seed=n)
