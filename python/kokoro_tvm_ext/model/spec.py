"""Kokoro-82M's conventions in one place: its sizes, its audio rate, and the boundary ids around a call's tokens.

hexgrad's ``KModel.forward`` turns phonemes into ids and calls ``forward_with_tokens`` on
``[0, *ids, 0]``: id 0 is the boundary on both sides (and the padding of a batch), and
the text encoders read at most 512 positions, so one call speaks at most 510 phoneme
tokens. The durations it predicts count the two boundary ids too. Every caller here
(the runtime, the PyTorch reference, the benchmarks, G2P, voices, the server) reads
these numbers and adds or strips the boundary ids with the two functions below.
"""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.support.errors import InvalidInputError

SAMPLE_RATE = 24000  # Hz of the audio
SAMPLES_PER_FRAME = 600  # audio samples per predicted duration frame (25 ms)
CONTEXT = 512  # positions the text encoders read (plbert's max_position_embeddings)
BOUNDARY_ID = 0  # around every call's tokens, and the padding of a batch
BOUNDARY_IDS = 2  # one on each side
MAX_TOKENS = CONTEXT - BOUNDARY_IDS  # phoneme tokens per call: 510
HARMONICS = 9  # sine harmonics of the decoder's source (its noise inputs' second axis)
STYLE_DIM = 256  # a style vector: 128 for the decoder, then 128 for prosody
VOICE_PACK_ROWS = MAX_TOKENS  # a voice pack has one style row per token count 1..510
# The tables token ids index (ALBERT's and the text encoder's), by their names in KModel's state_dict.
TOKEN_TABLES = ("bert.embeddings.word_embeddings.weight", "text_encoder.embedding.weight")


def add_boundary_ids(tokens) -> np.ndarray:
    """``[0, *tokens, 0]`` as int64: the ids ``KModel.forward`` gives ``forward_with_tokens``."""
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.ndim != 1:
        raise InvalidInputError(f"tokens must be a 1-D sequence of ids, got shape {list(ids.shape)}")
    boundary = np.full(1, BOUNDARY_ID, np.int64)
    return np.concatenate([boundary, ids, boundary])


def strip_boundary_ids(tokens) -> np.ndarray:
    """The phoneme tokens without the boundary ids, if ``tokens`` has them at both ends (else as given).

    A caller may pass either form; since 0 is never a phoneme id, ``[0, ..., 0]`` can only mean
    already wrapped. The dtype is kept, so the caller can still check it."""
    ids = np.asarray(tokens)
    if ids.ndim == 1 and ids.size >= BOUNDARY_IDS and ids[0] == BOUNDARY_ID and ids[-1] == BOUNDARY_ID:
        return ids[1:-1]
    return ids
