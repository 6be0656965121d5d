"""One compiled library, any checkpoint of Kokoro's shapes: weights bound to an artifact compiled for others.

The checkpoint is made here: the session model's weights with seeded noise (each tensor scaled by
1 + 10% noise), saved as safetensors. Bound to the session's artifact (compiled for the unperturbed
weights) without a compile, it must speak as PyTorch's KModel loaded with those weights: durations
identical, audio no further from a float64 reference than PyTorch float32 is (as tests/kokoro/test_pipeline.py).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("kokoro")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.errors import CheckpointMismatchError  # noqa: E402
from kokoro_tvm_ext.model import artifact_cache  # noqa: E402
from kokoro_tvm_ext.model.adapters.reference import reference, reference_float64  # noqa: E402
from kokoro_tvm_ext.model.binding import bind_checkpoint  # noqa: E402
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY  # noqa: E402

SPEED = 9.0  # random weights speak slowly; a high speed keeps the audio short


@pytest.fixture(scope="module")
def perturbed(kokoro_model, tmp_path_factory):
    """(path of the safetensors checkpoint, its arrays, a KModel loaded with it)."""
    from kokoro_tvm_ext.model.config import load_config
    from kokoro_tvm_ext.model.weights.kmodel import build_kmodel

    rng = np.random.default_rng(1234)
    state = {}
    for key, tensor in kokoro_model.state_dict().items():
        array = tensor.detach().numpy()
        if array.dtype.kind == "f":
            array = (array * (1 + 0.1 * rng.standard_normal(array.shape))).astype(array.dtype)
        state[key] = np.ascontiguousarray(array)
    path = tmp_path_factory.mktemp("checkpoint") / "fine-tune.safetensors"
    safetensors_numpy.save_file(state, str(path))
    model = build_kmodel(load_config(), seed=1)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return path, state, model.eval()


@pytest.fixture(scope="module")
def bound(small_artifact, perturbed, tmp_path_factory):
    """The checkpoint bound by ``ensure_artifact`` in a user cache whose only entry is the session artifact
    (the same library, compiled for other weights)."""
    cache = tmp_path_factory.mktemp("cache")
    (cache / "artifacts").mkdir()
    os.symlink(small_artifact, cache / "artifacts" / f"seed0-{artifact_cache.library_key()}")

    def no_compile(*args):
        raise AssertionError("binding a checkpoint must not compile")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KOKORO_TVM_CACHE", str(cache))
        mp.setattr(artifact_cache, "_compile_into", no_compile)
        out = artifact_cache.ensure_artifact(perturbed[0], quiet=True)
    assert out.parent == cache / "artifacts" and not out.is_symlink()
    return out


def test_bound_weights_speak_as_pytorch_with_them(bound, perturbed, small_artifact):
    runtime = kokoro_tvm_ext.KokoroTVM(bound)
    assert os.path.samefile(bound / LIBRARY, small_artifact / LIBRARY)  # the library reused, not rebuilt
    model = perturbed[2]
    rng = np.random.default_rng(5)
    for n_tokens in (3, 24):
        tokens = rng.integers(1, 178, n_tokens).astype(np.int64)
        style = (rng.standard_normal((1, 256)) * 0.3).astype(np.float32)
        audio, durations = runtime.synthesize(tokens, style, speed=SPEED, noise_seed=3)
        ref_audio, ref_durations = reference(model, tokens, style, speed=SPEED, noise_seed=3)
        np.testing.assert_array_equal(durations, ref_durations)
        truth = reference_float64(model, tokens, style, durations, speed=SPEED, noise_seed=3)
        ours, theirs = np.abs(audio - truth).max(), np.abs(ref_audio - truth).max()
        print(f"{n_tokens} tokens: max |audio - float64|: TVM {ours:.3g}, PyTorch fp32 {theirs:.3g}")
        assert ours <= max(theirs, 1e-4 * np.abs(truth).max())


def test_the_bound_weights_differ_from_the_artifacts_own(bound, small_artifact):
    # Guards the comparison above: it would pass trivially if binding kept the old weights.
    tokens, style = np.arange(1, 9, dtype=np.int64), np.full((1, 256), 0.1, np.float32)
    a, _ = kokoro_tvm_ext.KokoroTVM(bound).synthesize(tokens, style, speed=SPEED, noise_seed=0)
    b, _ = kokoro_tvm_ext.KokoroTVM(small_artifact).synthesize(tokens, style, speed=SPEED, noise_seed=0)
    assert a.shape != b.shape or np.abs(a - b).max() > 1e-3


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda s: s.update({"bert.embeddings.word_embeddings.weight": np.zeros((200, 128), np.float32)}), "200, 128"),
        (lambda s: s.pop("decoder.generator.conv_post.weight_v"), "decoder.generator.conv_post.weight_v"),
        (lambda s: s.update({"predictor.duration_proj.linear_layer.bias": np.zeros(50, np.int32)}), "int32"),
    ],
    ids=["other-vocabulary", "missing-tensor", "integer-tensor"],
)
def test_a_checkpoint_that_does_not_fit_is_refused_by_name(small_artifact, perturbed, tmp_path, change, named):
    state = dict(perturbed[1])
    change(state)
    with pytest.raises(CheckpointMismatchError, match=named) as err:
        bind_checkpoint(small_artifact, state, tmp_path / "out", None)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_library_only_artifact_given_to_a_speaker_gets_the_weights_bound(
    bound, perturbed, small_artifact, tmp_path, monkeypatch
):
    """`kokoro-tvm say --artifact DIR` on a library without weights, as cross-compiled for this machine (whose
    token embeddings are found only when weights are bound): the Speaker's config binds them into the cache,
    exactly as ensure_artifact binds them to the compiled library; the next time, the entry is found."""
    import json

    from kokoro_tvm_ext.model.prebuilt import library_only
    from kokoro_tvm_ext.model.runtime.artifact import META, read_meta, sealed
    from kokoro_tvm_ext.speech import SpeakerConfig

    library = library_only(small_artifact, tmp_path / "library")
    meta = {**json.loads((library / META).read_text()), "token_embeddings": []}
    (library / META).write_text(json.dumps(sealed(meta)))
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    entry = SpeakerConfig(artifact=library, weights=perturbed[0]).resolved(quiet=True).artifact
    assert entry.parent == tmp_path / "cache" / "artifacts" and os.path.samefile(entry / LIBRARY, library / LIBRARY)
    bound_meta, compiled = read_meta(entry), read_meta(bound)
    assert bound_meta["weights_sha256"] == compiled["weights_sha256"]  # the same weights as bound to the library
    assert bound_meta["token_embeddings"] == read_meta(small_artifact)["token_embeddings"]
    kokoro_tvm_ext.KokoroTVM(entry)

    monkeypatch.setattr(artifact_cache, "_bind_into", lambda *a: pytest.fail("bound again"))
    assert SpeakerConfig(artifact=library, weights=perturbed[0]).resolved().artifact == entry
    assert SpeakerConfig(artifact=entry).resolved().artifact == entry  # it holds weights: used as it is
