"""`synthesize` takes phoneme tokens with or without KModel's boundary ids, and counts only the phoneme
tokens against the 510-token limit (a full 512-id context that carries its boundary ids is accepted)."""

from __future__ import annotations

import numpy as np
import pytest

import kokoro_tvm_ext
from kokoro_tvm_ext.errors import InvalidInputError

SPEED = 9.0  # random weights: few frames per token, short audio
MAX_SPEED = 10.0


@pytest.fixture(scope="module")
def runtime(small_artifact):
    return kokoro_tvm_ext.KokoroTVM(small_artifact)


@pytest.fixture(scope="module")
def style():
    return (np.random.default_rng(1).standard_normal((1, 256)) * 0.3).astype(np.float32)


def test_a_full_context_with_its_boundary_ids_equals_the_bare_tokens(runtime, style):
    tokens = np.random.default_rng(0).integers(1, 178, 510)
    wrapped = np.concatenate([[0], tokens, [0]])  # KModel's input_ids, by hand: 512 ids
    # The top speed: 510 tokens are still ~1,300 frames of audio, twice.
    audio, durations = runtime.synthesize(wrapped, style, speed=MAX_SPEED)
    bare_audio, bare_durations = runtime.synthesize(tokens, style, speed=MAX_SPEED)
    assert len(durations) == 512  # one per id, the two boundary ids included
    np.testing.assert_array_equal(durations, bare_durations)
    np.testing.assert_array_equal(audio, bare_audio)


@pytest.mark.parametrize(
    "tokens, message",
    [
        (np.full(511, 5), "511 tokens is too long: at most 510 per call"),
        (np.concatenate([[0], np.full(511, 5), [0]]), "511 tokens is too long: at most 510 per call"),
        (np.array([0, 0]), "tokens is empty"),
        (np.array([], np.int64), "tokens is empty"),
        (np.array([0, 5, 7]), r"token ids must be in 1\.\.177 .*got \[0\]"),  # one side only is not a boundary
        (np.array([5, 178]), r"token ids must be in 1\.\.177 .*got \[178\]"),
        (np.array([[5, 7]]), "1-D array of ids"),
    ],
)
def test_bad_tokens_are_input_errors(runtime, style, tokens, message):
    with pytest.raises(InvalidInputError, match=message):
        runtime.synthesize(tokens, style, speed=SPEED)
