"""The compiled encoder against PyTorch's Resemblyzer (``VoiceEncoder("cpu").embed_utterance``) on real speech of
several lengths: Kokoro's (checked in) and a person's (Debian's alsa-utils)."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_tvm_ext.model.speaker_encoder import frontend, preprocess
from kokoro_tvm_ext.support.errors import InvalidInputError

# A compiled encoder in every test (the model tier: tests/conftest.py).
pytestmark = pytest.mark.model

TOLERANCE = 1e-4


def _reference_embedding(resemblyzer, reference, wav16: np.ndarray) -> np.ndarray:
    """Resemblyzer's embedding of a 16 kHz waveform, volume-normalised as its preprocess_wav does, not trimmed."""
    return reference.embed_utterance(resemblyzer.audio.normalize_volume(wav16, -30, increase_only=True))


def _human_lengths(human_clips) -> dict[str, np.ndarray]:
    at_16k = [preprocess.resample(wav, rate) for wav, rate in human_clips]
    return {"one": at_16k[0], "three": np.concatenate(at_16k[:3]), "all": np.concatenate(at_16k)}


def test_embedding_is_pytorchs_on_kokoro_speech(encoder, resemblyzer, reference, kokoro_clips):
    partials = []
    for name, (wav, rate) in kokoro_clips.items():
        wav16 = preprocess.resample(wav, rate)
        ours = encoder.embed(wav16, 16000, trim=False)
        theirs = _reference_embedding(resemblyzer, reference, wav16)
        assert ours.shape == (256,) and ours.dtype == np.float32
        assert abs(np.linalg.norm(ours) - 1) < 1e-6
        assert np.abs(ours - theirs).max() < TOLERANCE, name
        partials.append(len(frontend.partial_starts(len(wav16))))
    assert sorted(partials)[0] == 1 and sorted(partials)[-1] >= 10  # one window to many


def test_embedding_is_pytorchs_on_human_speech(encoder, resemblyzer, reference, human_clips):
    for name, wav16 in _human_lengths(human_clips).items():
        ours = encoder.embed(wav16, 16000, trim=False)
        theirs = _reference_embedding(resemblyzer, reference, wav16)
        assert np.abs(ours - theirs).max() < TOLERANCE, name


def test_embedding_is_pytorchs_on_a_speech_in_the_public_domain(encoder, resemblyzer, reference, jfk):
    """11 s of one man at a podium (public_speech.py): a real room, a real microphone, 1961's tape."""
    wav, rate = jfk
    assert rate == 16000
    ours = encoder.embed(wav, rate, trim=False)
    theirs = _reference_embedding(resemblyzer, reference, wav)
    assert np.abs(ours - theirs).max() < TOLERANCE


def test_embed_many_runs_one_batch_with_each_recordings_own_embedding(
    encoder, resemblyzer, reference, kokoro_clips, human_clips
):
    wavs = [preprocess.resample(wav, rate) for wav, rate in kokoro_clips.values()]
    wavs += list(_human_lengths(human_clips).values())
    many = encoder.embed_many(wavs, 16000, trim=False)
    assert many.shape == (len(wavs), 256) and many.dtype == np.float32
    for row, wav in zip(many, wavs):
        assert np.abs(row - _reference_embedding(resemblyzer, reference, wav)).max() < TOLERANCE
    assert encoder.embed_many([], 16000).shape == (0, 256)


def test_the_whole_path_from_a_recording_is_close_to_resemblyzers(encoder, resemblyzer, human_clips, reference):
    """Any rate in, silences trimmed: our resampler and energy trim against librosa's and WebRTC's. The cosine
    distance they leave (docs/plugin.md) is far below the distance between two speakers."""
    one_person = np.concatenate([wav for wav, _ in human_clips])
    ours = encoder.embed(one_person, 48000)
    theirs = reference.embed_utterance(resemblyzer.preprocess_wav(one_person, 48000))
    assert float(ours @ theirs) > 0.99
    wav, rate = human_clips[0]
    assert float(ours @ encoder.embed(wav, rate)) > float(ours @ theirs) - 0.2  # the same voice stays close


def test_a_different_voice_is_farther_than_the_trims_difference(encoder, kokoro_clips):
    (a, rate_a), (b, rate_b) = kokoro_clips["medium_am_adam"], kokoro_clips["long_bf_emma"]
    assert float(encoder.embed(a, rate_a) @ encoder.embed(b, rate_b)) < 0.9


def test_silence_and_no_voice_are_refused_in_one_line(encoder):
    with pytest.raises(InvalidInputError, match="silent"):
        encoder.embed(np.zeros(24000, np.float32), 24000)
    quiet_hum = (1e-5 * np.sin(np.arange(16000) / 3)).astype(np.float32)  # -> -30 dBFS, then all "voice"
    assert encoder.embed(quiet_hum, 16000).shape == (256,)


def test_the_network_runs_on_the_plugins_lstm_and_gemm_kernels():
    import tvm

    from kokoro_tvm_ext.model.speaker_encoder.network import build_module
    from kokoro_tvm_ext.model.speaker_encoder.spec import WEIGHT_SHAPES
    from kokoro_tvm_ext.plugin.passes.pipeline import plugin_passes

    weights = {name: np.zeros(shape, np.float32) for name, shape in WEIGHT_SHAPES.items()}
    with tvm.target.Target("llvm"):
        lowered = tvm.transform.Sequential(plugin_passes())(build_module(weights)).script()
    assert 'call_dps_packed("kokoro_tvm_ext.lstm"' in lowered
    assert 'call_dps_packed("kokoro_tvm_ext.matmul_panels"' in lowered  # the linear layer, weights packed


def test_the_artifact_is_cached(encoder):
    import time

    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
    from kokoro_tvm_ext.model.speaker_encoder.compile import LIBRARY, artifact_dir, read_meta

    started = time.perf_counter()
    SpeakerEncoder.load()
    assert time.perf_counter() - started < 5  # found, not compiled (a compile takes seconds more)
    meta = read_meta(artifact_dir())
    assert (artifact_dir() / LIBRARY).is_file() and meta["model"] == "resemblyzer-0.1.4"


def test_a_recordings_embedding_does_not_depend_on_its_batch(encoder, kokoro_clips):
    """Bit for bit: alone, in a batch, again (a seeded voice design repeats its scores exactly)."""
    wavs = [wav for wav, _ in kokoro_clips.values()]
    many = encoder.embed_many(wavs, 24000, trim=False)
    assert np.array_equal(many, np.stack([encoder.embed(w, 24000, trim=False) for w in wavs]))
    assert np.array_equal(many, encoder.embed_many(wavs, 24000, trim=False))
    assert np.array_equal(many[::-1], encoder.embed_many(wavs[::-1], 24000, trim=False))


def test_many_windows_run_in_bounded_batches_with_the_same_result(encoder, kokoro_clips, monkeypatch):
    from kokoro_tvm_ext.model.speaker_encoder import encoder as encoder_module

    wavs = [wav for wav, _ in kokoro_clips.values()]
    whole = encoder.embed_many(wavs, 24000, trim=False)
    monkeypatch.setattr(encoder_module, "MAX_BATCH", 3)
    assert np.array_equal(encoder.embed_many(wavs, 24000, trim=False), whole)
