"""The model's conventions (``model_spec``) against hexgrad's KModel itself and values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.model.spec import (
    CONTEXT,
    MAX_TOKENS,
    SAMPLE_RATE,
    SAMPLES_PER_FRAME,
    STYLE_DIM,
    VOICE_PACK_ROWS,
    add_boundary_ids,
    strip_boundary_ids,
)


def test_boundary_ids_by_hand():
    wrapped = add_boundary_ids([5, 7])
    assert wrapped.dtype == np.int64 and wrapped.tolist() == [0, 5, 7, 0]
    assert add_boundary_ids(np.array([3], np.int32)).tolist() == [0, 3, 0]
    assert strip_boundary_ids([0, 5, 7, 0]).tolist() == [5, 7]
    assert strip_boundary_ids([5, 7]).tolist() == [5, 7]  # not wrapped: as given
    assert strip_boundary_ids([0, 5, 7]).tolist() == [0, 5, 7]  # one side only is not KModel's wrapping
    assert strip_boundary_ids([0, 0]).tolist() == []
    assert strip_boundary_ids(np.array([0, 4, 0], np.int32)).dtype == np.int32  # the caller checks dtypes
    with pytest.raises(InvalidInputError, match=r"1-D sequence of ids, got shape \[1, 2\]"):
        add_boundary_ids([[5, 7]])


def test_sizes_by_hand():
    assert (CONTEXT, MAX_TOKENS, VOICE_PACK_ROWS, STYLE_DIM) == (512, 510, 510, 256)
    assert SAMPLES_PER_FRAME / SAMPLE_RATE == 0.025  # a frame is 25 ms
    assert VOICE_PACK_ROWS * STYLE_DIM * 4 == 522_240  # bytes of a raw float32 pack in hexgrad's sdist


@pytest.fixture
def fed_ids(kokoro_model, monkeypatch):
    """What ``KModel.forward`` passes to ``forward_with_tokens`` (which is not run)."""
    import torch

    seen = []

    def record(input_ids, ref_s, speed):
        seen.append(input_ids.numpy().reshape(-1))
        return torch.zeros(1), torch.ones(input_ids.shape[-1], dtype=torch.long)

    monkeypatch.setattr(kokoro_model, "forward_with_tokens", record)
    return seen


def test_add_boundary_ids_is_what_kmodel_feeds_its_network(kokoro_model, fed_ids):
    import torch

    from kokoro_tvm_ext.speech import tokenize

    phonemes = "həlˈO wˈɜɹld"
    kokoro_model(phonemes, torch.zeros(1, STYLE_DIM))
    tokens = tokenize(phonemes, kokoro_model.vocab)
    np.testing.assert_array_equal(fed_ids[0], add_boundary_ids(tokens))
    np.testing.assert_array_equal(strip_boundary_ids(fed_ids[0]), tokens)


def test_max_tokens_is_the_longest_input_kmodel_takes(kokoro_model, fed_ids):
    import torch

    assert kokoro_model.context_length == CONTEXT
    kokoro_model("ə" * MAX_TOKENS, torch.zeros(1, STYLE_DIM))
    assert len(fed_ids[0]) == CONTEXT
    with pytest.raises(AssertionError):
        kokoro_model("ə" * (MAX_TOKENS + 1), torch.zeros(1, STYLE_DIM))


def test_style_and_frames_match_kmodel(kokoro_model):
    """A style vector is the decoder's half then the prosody half, and each predicted frame
    is SAMPLES_PER_FRAME samples of audio."""
    import torch

    from kokoro_tvm_ext.model.config import load_config

    assert 2 * load_config()["style_dim"] == STYLE_DIM
    ids = torch.from_numpy(add_boundary_ids([50, 83, 156, 43])).reshape(1, -1)
    torch.manual_seed(0)
    with torch.no_grad():
        audio, durations = kokoro_model.forward_with_tokens(ids, torch.randn(1, STYLE_DIM) * 0.3, 4.0)
    assert len(durations.reshape(-1)) == len(ids[0])  # the boundary ids get durations too
    assert audio.numel() == SAMPLES_PER_FRAME * int(durations.sum())


def test_the_reference_takes_tokens_as_the_runtime_does(kokoro_model):
    """With or without the boundary ids, the PyTorch reference speaks the same phoneme tokens."""
    from kokoro_tvm_ext.model.adapters.reference import reference

    tokens = [50, 83, 156, 43]
    style = np.full((1, STYLE_DIM), 0.1, np.float32)
    audio, durations = reference(kokoro_model, tokens, style, speed=4.0, noise_seed=0)
    audio_wrapped, durations_wrapped = reference(kokoro_model, add_boundary_ids(tokens), style, speed=4.0, noise_seed=0)
    assert len(durations) == len(tokens) + 2
    np.testing.assert_array_equal(durations_wrapped, durations)
    np.testing.assert_array_equal(audio_wrapped, audio)
