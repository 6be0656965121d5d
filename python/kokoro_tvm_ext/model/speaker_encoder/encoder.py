"""``SpeakerEncoder``: a recording -> Resemblyzer's 256-value speaker embedding (unit norm), without torch.

``embed`` = ``preprocess`` (16 kHz, volume, silence trim) -> 1.6 s partial windows of the mel spectrogram ->
the network on all of them as one batch -> the mean of their embeddings, renormalised, as Resemblyzer's
``VoiceEncoder.embed_utterance(preprocess_wav(wav, rate))``. ``embed_many`` runs the partials of every recording
in one batch.
"""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.model.runtime.threads import set_num_threads
from kokoro_tvm_ext.model.speaker_encoder import frontend
from kokoro_tvm_ext.model.speaker_encoder.compile import ensure_encoder_artifact
from kokoro_tvm_ext.model.speaker_encoder.preprocess import preprocess
from kokoro_tvm_ext.model.speaker_encoder.runtime import CompiledNetwork
from kokoro_tvm_ext.model.speaker_encoder.spec import EMBEDDING, SAMPLE_RATE
from kokoro_tvm_ext.support.cache import Progress
from kokoro_tvm_ext.support.errors import InvalidInputError

# Windows run through the network at a time (the LSTM keeps every step's output: 42 MB a layer for 256 windows),
# so an hour of audio (2,800 windows) takes bounded memory.
MAX_BATCH = 256


class SpeakerEncoder:
    """Resemblyzer's GE2E encoder. Build it with :meth:`load`."""

    sample_rate = SAMPLE_RATE
    dim = EMBEDDING

    def __init__(self, network) -> None:
        """``network``: partials [n, 160, 40] float32 -> unit-norm embeddings [n, 256] float32."""
        self._network = network

    @classmethod
    def load(cls, threads: int | None = None, progress: Progress | None = None) -> SpeakerEncoder:
        """The encoder, compiled for this CPU and cached on first use (its weights fetched then: ``progress`` reports
        both). ``threads``: for TVM and the plugin's kernels in this process, as for Kokoro (``set_num_threads``:
        the first count set holds); default ``TVM_NUM_THREADS``, else every core."""
        if threads is not None:
            set_num_threads(threads)
        return cls(CompiledNetwork(ensure_encoder_artifact(progress)))

    def _partials(self, wav, sample_rate: int, trim: bool) -> np.ndarray:
        audio = preprocess(wav, sample_rate, trim=trim)
        if audio.size == 0:
            raise InvalidInputError("no voice in the audio: nothing is left once its silences are trimmed")
        return frontend.partials(audio)

    def embed_partials(self, mels: np.ndarray) -> np.ndarray:
        """The network alone: mel partials [n, 160, 40] -> unit-norm embeddings [n, 256], in batches of at most
        ``MAX_BATCH`` windows (each window's embedding does not depend on the others in its batch, bit for bit)."""
        mels = np.ascontiguousarray(mels, dtype=np.float32)
        out = np.empty((len(mels), EMBEDDING), np.float32)
        for start in range(0, len(mels), MAX_BATCH):
            out[start : start + MAX_BATCH] = self._network(mels[start : start + MAX_BATCH])
        return out

    def embed(self, wav: np.ndarray, sample_rate: int, *, trim: bool = True) -> np.ndarray:
        """The utterance embedding (256,) float32, unit norm, of ``wav`` (mono, or channels averaged) at
        ``sample_rate``. ``trim=False`` keeps silences (audio that has none worth cutting, such as Kokoro's)."""
        return self.embed_many([wav], sample_rate, trim=trim)[0]

    def embed_many(self, wavs: list[np.ndarray], sample_rate: int, *, trim: bool = True) -> np.ndarray:
        """Each recording's embedding, [n, 256] float32, their partials run as one batch."""
        if len(wavs) == 0:
            return np.zeros((0, EMBEDDING), np.float32)
        batches = [self._partials(wav, sample_rate, trim) for wav in wavs]
        embeds = self.embed_partials(np.concatenate(batches))
        out = np.empty((len(batches), EMBEDDING), np.float32)
        start = 0
        for i, batch in enumerate(batches):
            mean = embeds[start : start + len(batch)].mean(axis=0)
            out[i] = mean / np.linalg.norm(mean)
            start += len(batch)
        return out
