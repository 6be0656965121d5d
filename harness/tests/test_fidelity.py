"""The fidelity yardsticks (the benchmark's columns, the precision tests' bound) against values computed by hand.

Scaling a signal by ``a`` scales every STFT and mel magnitude by ``a``, so where
nothing reaches the 1e-5 clamp the log-mel L1 is exactly ``|ln a|``, and each
resolution of the multi-resolution STFT distance is ``|1 - a|`` (spectral
convergence) plus ``|ln a|``.
"""

import math

import numpy as np
import pytest

pytest.importorskip("librosa")
from kokoro_harness import fidelity  # noqa: E402

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)


@pytest.fixture(scope="module")
def noise():
    return (np.random.default_rng(0).standard_normal(24000) * 0.1).astype(np.float32)


def test_log_mel_has_80_bands_at_hop_256(noise):
    mel = fidelity.log_mel(noise)
    assert mel.shape == (80, 1 + noise.size // 256)
    assert mel.min() > math.log(1e-5)  # white noise is loud in every band: no clamping below


@pytest.mark.parametrize("gain", [0.5, 2.0, 1.1])
def test_log_mel_l1_of_a_scaled_signal_is_the_log_of_the_gain(noise, gain):
    assert fidelity.log_mel_l1(noise * gain, noise) == pytest.approx(abs(math.log(gain)), abs=1e-5)
    assert fidelity.log_mel_l1(noise, noise) == 0.0


def test_log_mel_clamps_silence_at_1e_minus_5():
    silence = np.zeros(4096, np.float32)
    np.testing.assert_allclose(fidelity.log_mel(silence), math.log(1e-5))
    assert fidelity.log_mel_l1(silence, silence * 3) == 0.0


@pytest.mark.parametrize("gain", [0.5, 2.0])
def test_mrstft_of_a_scaled_signal(noise, gain):
    want = abs(1 - gain) + abs(math.log(gain))
    assert fidelity.mrstft(noise * gain, noise) == pytest.approx(want, rel=1e-4)
    assert fidelity.mrstft(noise, noise) == 0.0


def test_distances_compare_the_common_length(noise):
    longer = np.concatenate([noise, np.ones(1000, np.float32)])
    assert fidelity.log_mel_l1(longer, noise) == 0.0
    assert fidelity.snr_db(longer, noise) is None


def test_snr_of_a_known_error(noise):
    error = np.full_like(noise, 0.01)
    want = 10 * math.log10(np.sum(noise.astype(np.float64) ** 2) / (noise.size * 1e-4))
    assert fidelity.snr_db(noise + error, noise) == pytest.approx(want, rel=1e-4)


def test_word_error_rate_ignores_case_and_punctuation():
    pytest.importorskip("jiwer")
    assert fidelity.word_error_rate("the quick brown fox", "The quick, brown fox!") == 0.0
    assert fidelity.word_error_rate("the quick brown box", "The quick brown fox.") == 0.25
