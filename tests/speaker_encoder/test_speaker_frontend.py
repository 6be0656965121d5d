"""The numpy front end against Resemblyzer's own (librosa's mel spectrogram, its partial windows, its volume
normalisation and silence smoothing) and librosa's filters."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_tvm_ext.model.speaker_encoder import frontend, preprocess
from kokoro_tvm_ext.support.errors import InvalidInputError


def _speech_16k(kokoro_clips) -> list[np.ndarray]:
    return [preprocess.resample(wav, rate) for wav, rate in kokoro_clips.values()]


def test_mel_filters_are_librosas_slaney_filters():
    librosa = pytest.importorskip("librosa")
    expected = librosa.filters.mel(sr=16000, n_fft=400, n_mels=40)  # htk=False, norm="slaney": Resemblyzer's
    np.testing.assert_allclose(frontend.mel_filters(), expected, rtol=1e-5, atol=1e-9)


def test_mel_spectrogram_is_resemblyzers_on_speech(resemblyzer, kokoro_clips):
    for wav in _speech_16k(kokoro_clips):
        expected = resemblyzer.audio.wav_to_mel_spectrogram(wav)
        got = frontend.mel_spectrogram(wav)
        assert got.shape == expected.shape and got.dtype == np.float32
        # librosa computes in float32, this in float64: relative to the spectrogram's peak
        assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


@pytest.mark.parametrize("n_samples", [0, 1, 159, 160, 15_999, 16_000, 25_440, 25_600, 41_000, 160_000, 163_217])
def test_partial_windows_are_resemblyzers(resemblyzer, n_samples):
    _, mel_slices = resemblyzer.VoiceEncoder.compute_partial_slices(n_samples, rate=1.3, min_coverage=0.75)
    assert frontend.partial_starts(n_samples) == [s.start for s in mel_slices]


def test_partials_are_the_mel_windows_resemblyzer_feeds_its_network(resemblyzer, kokoro_clips):
    wav = _speech_16k(kokoro_clips)[1]
    wav_slices, mel_slices = resemblyzer.VoiceEncoder.compute_partial_slices(len(wav), rate=1.3, min_coverage=0.75)
    padded = np.pad(wav, (0, max(0, wav_slices[-1].stop - len(wav))))
    mel = resemblyzer.audio.wav_to_mel_spectrogram(padded)
    expected = np.array([mel[s] for s in mel_slices])
    got = frontend.partials(wav)
    assert got.shape == expected.shape == (len(mel_slices), 160, 40)
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_volume_normalisation_is_resemblyzers(resemblyzer, kokoro_clips):
    wav = _speech_16k(kokoro_clips)[0]
    for gain in (0.01, 0.1, 1.0):  # raised to -30 dBFS when quieter, left alone when louder
        expected = resemblyzer.audio.normalize_volume(wav * gain, -30, increase_only=True)
        np.testing.assert_allclose(preprocess.normalize_volume(wav * gain), expected, rtol=1e-5, atol=1e-7)


def _webrtc_flags(wav: np.ndarray) -> np.ndarray:
    webrtcvad = pytest.importorskip("webrtcvad")
    usable = wav[: len(wav) - len(wav) % 480]
    pcm = np.round(usable * (2**15 - 1)).astype(np.int16).tobytes()
    vad = webrtcvad.Vad(3)
    return np.array([vad.is_speech(pcm[i * 960 : (i + 1) * 960], 16000) for i in range(len(usable) // 480)])


def test_silence_smoothing_is_resemblyzers_given_the_same_voice_flags(resemblyzer, kokoro_clips, human_clips):
    """With WebRTC's flags (what Resemblyzer's trim computes first), the smoothing and cut are its own exactly."""
    clips = _speech_16k(kokoro_clips) + [preprocess.resample(w, r) for w, r in human_clips[:3]]
    for wav in clips:
        wav = preprocess.normalize_volume(wav)
        expected = resemblyzer.audio.trim_long_silences(wav)
        np.testing.assert_array_equal(preprocess.trim_silences(wav, _webrtc_flags(wav)), expected)


def test_resampling_keeps_length_and_content(kokoro_clips):
    """24 kHz -> 16 kHz: 2/3 of the samples, and the same sound (against librosa's soxr resampler)."""
    librosa = pytest.importorskip("librosa")
    for wav, rate in kokoro_clips.values():
        ours = preprocess.resample(wav, rate)
        theirs = librosa.resample(wav, orig_sr=rate, target_sr=16000)
        assert abs(len(ours) - len(theirs)) <= 1
        n = min(len(ours), len(theirs))
        error = np.sqrt(np.mean((ours[:n] - theirs[:n]) ** 2)) / np.sqrt(np.mean(theirs[:n] ** 2))
        assert error < 0.05, error  # aligned (no delay) and the same band: a few % apart, the filters differ


def test_bad_audio_is_refused_in_one_line():
    with pytest.raises(InvalidInputError, match="silent"):
        preprocess.preprocess(np.zeros(16000, np.float32), 16000)
    with pytest.raises(InvalidInputError, match="NaN"):
        preprocess.preprocess(np.full(16000, np.nan, np.float32), 16000)
    with pytest.raises(InvalidInputError, match="sample_rate"):
        preprocess.preprocess(np.ones(16000, np.float32), 0)
    with pytest.raises(InvalidInputError, match="1-D"):
        preprocess.preprocess(np.ones((2, 2, 2), np.float32), 16000)
    with pytest.raises(InvalidInputError, match="numbers"):
        preprocess.preprocess(np.array(["a"]), 16000)


def test_channels_and_integer_pcm_are_read_as_mono_float():
    tone = np.sin(np.arange(16000) / 5).astype(np.float32) * 0.5
    stereo = np.stack([tone, tone], axis=1)
    np.testing.assert_allclose(preprocess.as_mono(stereo), tone, atol=1e-7)
    np.testing.assert_allclose(preprocess.as_mono(stereo.T), tone, atol=1e-7)
    pcm = np.round(tone * 32767).astype(np.int16)
    np.testing.assert_allclose(preprocess.as_mono(pcm), tone, atol=1e-4)


def test_a_long_recording_is_transformed_in_blocks_with_the_same_result(resemblyzer, kokoro_clips, monkeypatch):
    wav = _speech_16k(kokoro_clips)[0]
    monkeypatch.setattr(frontend, "BLOCK_FRAMES", 37)  # blocks that do not divide the frame count
    expected = resemblyzer.audio.wav_to_mel_spectrogram(wav)
    assert np.abs(frontend.mel_spectrogram(wav) - expected).max() <= 1e-5 * np.abs(expected).max()


def test_the_energy_trim_keeps_what_webrtcs_keeps_on_real_speech(kokoro_clips, human_clips):
    """The windows kept by our flags and by WebRTC's (mode 3, Resemblyzer's), through the same smoothing."""
    clips = _speech_16k(kokoro_clips) + [preprocess.resample(w, r) for w, r in human_clips]
    agreement = []
    for wav in clips:
        wav = preprocess.normalize_volume(wav)
        ours = preprocess.keep_mask(preprocess.voiced_windows(wav))
        agreement.append(np.mean(ours == preprocess.keep_mask(_webrtc_flags(wav))))
    assert np.mean(agreement) > 0.95 and min(agreement) > 0.85, agreement
