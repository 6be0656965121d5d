"""The whole model: compile_kokoro → artifact → KokoroTVM, against PyTorch KModel.

Random weights at the real Kokoro-82M config. One artifact is compiled per
session. Durations must be identical; stage outputs within 1e-4 of PyTorch
relative to their max; audio is judged against a float64 reference (see
reference_float64) and must be no further from it than PyTorch float32 is.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("kokoro")

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.model.adapters.reference import _durations, reference, reference_float64  # noqa: E402

# Random weights predict ~25 frames per token at speed 1; a high speed keeps
# the frame count (and the test's run time) small without changing the path.
SPEED = 9.0


@pytest.fixture(scope="session")
def runtime(small_artifact):
    return kokoro_tvm_ext.KokoroTVM(small_artifact)


def make_input(n_tokens: int, seed: int):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, 178, n_tokens).astype(np.int64)
    style = (rng.standard_normal((1, 256)) * 0.3).astype(np.float32)
    return tokens, style


def rel_err(got, want) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("n_tokens", [1, 16])
def test_audio_and_durations_match_pytorch(runtime, kokoro_model, n_tokens):
    tokens, style = make_input(n_tokens, seed=n_tokens)
    audio, durations = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=3)
    ref_audio, ref_durations = reference(kokoro_model, tokens, style, speed=SPEED, noise_seed=3)
    np.testing.assert_array_equal(durations, ref_durations)
    assert audio.dtype == np.float32 and audio.shape == ref_audio.shape == (600 * durations.sum(),)
    truth = reference_float64(kokoro_model, tokens, style, durations, speed=SPEED, noise_seed=3)
    ours, theirs = np.abs(audio - truth).max(), np.abs(ref_audio - truth).max()
    print(f"{n_tokens} tokens: max |audio - float64|: TVM {ours:.3g}, PyTorch fp32 {theirs:.3g}")
    assert ours <= max(theirs, 1e-4 * np.abs(truth).max())


@pytest.mark.parametrize("n_tokens", [230, 509, 510])
def test_text_stage_outputs_match_pytorch_up_to_the_longest_input(runtime, kokoro_model, n_tokens):
    # 509 and 510 once failed: the stage was compiled for 510 ids, boundary ids included.
    tokens, style = make_input(n_tokens, seed=7)
    ids = np.concatenate([[0], tokens, [0]])[None]
    pred_dur, d, t_en = runtime._run("text_stage", ids, np.array([ids.shape[1]]), style, np.array([1.0], np.float32))
    with torch.no_grad():
        ids_t = torch.from_numpy(ids)
        want_d, want_dur = _durations(kokoro_model, ids_t, torch.from_numpy(style), 1.0)
        mask = torch.zeros_like(ids_t, dtype=torch.bool)
        want_t_en = kokoro_model.text_encoder(ids_t, torch.tensor([ids.shape[1]]), mask)
    np.testing.assert_array_equal(pred_dur[0], want_dur.numpy())
    assert rel_err(d, want_d.numpy()) < 1e-4
    assert rel_err(t_en, want_t_en.numpy()) < 1e-4


def test_batch_of_mixed_lengths_equals_solo_runs(runtime):
    items = [make_input(n, seed=100 + n) for n in (5, 12, 1)]
    batch = runtime.synthesize_batch([t for t, _ in items], [s for _, s in items], [SPEED] * 3, [1, 2, 3])
    for (tokens, style), (audio, durations), seed in zip(items, batch, (1, 2, 3)):
        solo_audio, solo_durations = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=seed)
        np.testing.assert_array_equal(durations, solo_durations)
        np.testing.assert_allclose(audio, solo_audio, rtol=0, atol=1e-5 * np.abs(solo_audio).max())


def test_a_batch_larger_than_the_compiled_one_is_split(runtime):
    assert runtime.max_batch == 64
    items = [make_input(1 + n % 3, seed=200 + n) for n in range(runtime.max_batch + 2)]
    batch = runtime.synthesize_batch(
        [t for t, _ in items], [s for _, s in items], [10.0] * len(items), list(range(len(items)))
    )
    assert len(batch) == len(items)
    for n in (0, runtime.max_batch - 1, runtime.max_batch, runtime.max_batch + 1):
        solo_audio, solo_durations = runtime.synthesize(items[n][0], items[n][1], speed=10.0, noise_seed=n)
        np.testing.assert_array_equal(batch[n][1], solo_durations)
        np.testing.assert_allclose(batch[n][0], solo_audio, rtol=0, atol=1e-5 * np.abs(solo_audio).max())


def test_same_seed_same_audio_and_zero_noise_option(runtime):
    tokens, style = make_input(4, seed=1)
    a1, _ = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=5)
    a2, _ = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=5)
    a3, _ = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=6)
    np.testing.assert_array_equal(a1, a2)
    assert np.abs(a1 - a3).max() > 0
    z1, _ = runtime.synthesize(tokens, style, speed=SPEED, zero_noise=True)
    z2, _ = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=99, zero_noise=True)
    np.testing.assert_array_equal(z1, z2)


@pytest.mark.parametrize(
    "tokens,style,error,message",
    [
        (np.zeros(0, np.int64), None, ValueError, "tokens is empty"),
        (np.ones(511, np.int64), None, ValueError, "511 tokens is too long: at most 510"),
        (np.ones((2, 3), np.int64), None, ValueError, "tokens must be a 1-D array"),
        (np.ones(3, np.float32), None, TypeError, "tokens must be integer ids"),
        (np.array([5, 0, 7]), None, ValueError, r"token ids must be in 1\.\.177"),
        (np.ones(3, np.int64), np.zeros((1, 128), np.float32), ValueError, r"style must have shape \[1, 256\]"),
        (np.ones(3, np.int64), np.zeros((1, 256)), TypeError, "style must be float32, got dtype float64"),
    ],
)
def test_bad_inputs_are_named(runtime, tokens, style, error, message):
    style = np.zeros((1, 256), np.float32) if style is None else style
    with pytest.raises(error, match=message):
        runtime.synthesize(tokens, style)


def test_missing_artifact_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no compiled Kokoro artifact"):
        kokoro_tvm_ext.KokoroTVM(tmp_path)


def test_compile_refuses_something_else():
    with pytest.raises(TypeError, match="compile_kokoro needs a kokoro.KModel"):
        kokoro_tvm_ext.compile_kokoro(torch.nn.Linear(2, 2), "/nonexistent")
