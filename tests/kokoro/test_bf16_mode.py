"""precision="bf16" end to end: same durations as PyTorch, audio close to PyTorch fp32.

On a CPU with AVX512-BF16 the decoder's convolutions and matmuls run on bf16
inputs with f32 accumulation; elsewhere the same artifact runs them in f32.
Either way the text stage stays f32, so the durations must be identical, and
the audio is judged by its SNR against PyTorch's float32 audio.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("kokoro")

import tvm  # noqa: E402
from precision_modes import precision_runtime, snr_db  # noqa: E402

from kokoro_tvm_ext.model.adapters.reference import reference  # noqa: E402

SPEED = 9.0  # few frames per token: a short run on the same code path


@pytest.fixture(scope="module")
def bf16_runtime(kokoro_model):
    return precision_runtime(kokoro_model, "bf16")


def test_bf16_artifact_records_its_precision(bf16_runtime):
    assert bf16_runtime.meta["precision"] == "bf16"


@pytest.mark.parametrize("n_tokens", [1, 24])
def test_bf16_audio_is_within_30_db_of_pytorch_fp32(bf16_runtime, kokoro_model, n_tokens):
    rng = np.random.default_rng(100 + n_tokens)
    tokens = rng.integers(1, 178, n_tokens).astype(np.int64)
    style = (rng.standard_normal((1, 256)) * 0.3).astype(np.float32)
    audio, durations = bf16_runtime.synthesize(tokens, style, speed=SPEED, noise_seed=5)
    ref_audio, ref_durations = reference(kokoro_model, tokens, style, speed=SPEED, noise_seed=5)
    np.testing.assert_array_equal(durations, ref_durations)
    snr = snr_db(audio, ref_audio)
    print(f"{n_tokens} tokens: bf16 SNR vs PyTorch fp32 {snr:.1f} dB")
    assert snr >= 30.0


@pytest.mark.skipif(
    not bool(tvm.get_global_func("kokoro_tvm_ext.bf16_native")()),
    reason="the CPU lacks AVX512-BF16: the bf16 artifact runs the f32 kernels here (the tests above check that), "
    "so there is no bf16 loss to judge",
)
def test_bf16_spectrum_differs_from_pytorch_less_than_another_noise_draw(bf16_runtime, kokoro_model):
    """The fast mode judged as vocoders are: by log-mel L1 against PyTorch fp32 fed the same noise.

    The bound is PyTorch's own: the same model in fp32 with a different noise draw. A lossy mode
    whose spectrum moves less than re-drawing SineGen's noise does is not audible as loss.
    """
    from kokoro_harness.fidelity import log_mel_l1

    pytest.importorskip("librosa")
    rng = np.random.default_rng(7)
    tokens = rng.integers(1, 178, 24).astype(np.int64)
    style = (rng.standard_normal((1, 256)) * 0.3).astype(np.float32)
    # About 4 s of audio (random weights speak ~25 frames a token): enough frames for the log-mel
    # statistics, a third of the PyTorch time of the 40 tokens at speed 2 this used to take.
    speed = 3.5
    audio, _ = bf16_runtime.synthesize(tokens, style, speed=speed, noise_seed=5)
    ref_audio, _ = reference(kokoro_model, tokens, style, speed=speed, noise_seed=5)
    other_draw, _ = reference(kokoro_model, tokens, style, speed=speed, noise_seed=6)
    ours, floor = log_mel_l1(audio, ref_audio), log_mel_l1(other_draw, ref_audio)
    print(f"bf16 log-mel L1 vs PyTorch fp32 {ours:.4f}; another noise draw {floor:.4f}")
    assert ours < floor
