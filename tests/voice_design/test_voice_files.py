"""Voice files of your own (NAME.npy + NAME.json): their language from the sidecar, inside blends, from a voices
directory, and the errors for a bad file. References: the stock packs loaded by name and numpy's arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kokoro_tvm_ext.speech.voices import (
    add_voice_dir,
    list_voices,
    load_voice,
    packs,
    read_sidecar,
    save_voice,
    voice_language,
)
from kokoro_tvm_ext.support.errors import CorruptAssetError, InvalidInputError, UnknownVoiceError


@pytest.fixture
def emma_copy(tmp_path):
    """bf_emma's pack saved as a voice file of British English."""
    path = save_voice(tmp_path / "narrator.npy", load_voice("bf_emma"), {"language": "b", "provenance": {"seed": 3}})
    return path


@pytest.fixture(autouse=True)
def no_dirs(monkeypatch):  # tests/conftest.py empties the added directories
    monkeypatch.delenv(packs.VOICES_ENV, raising=False)


def test_a_voice_file_and_its_sidecar_are_written_together(emma_copy):
    np.testing.assert_array_equal(np.load(emma_copy), load_voice("bf_emma"))
    meta = json.loads(emma_copy.with_suffix(".json").read_text())
    assert meta == {"format": "kokoro-tvm-voice/1", "language": "b", "provenance": {"seed": 3}}
    assert sorted(p.name for p in emma_copy.parent.iterdir()) == ["narrator.json", "narrator.npy"]  # no temp files


def test_the_language_comes_from_the_sidecar(emma_copy):
    assert voice_language(str(emma_copy)) == "b"
    assert voice_language(f"{emma_copy}:0.5,af_heart:0.5") == "b"  # a blend speaks its first voice's language
    assert voice_language(f"af_heart:0.5,{emma_copy}:0.5") == "a"
    assert voice_language(f"{emma_copy}(1)+af_heart(1)") == "b"


def test_a_file_inside_a_blend_is_blended_as_a_stock_voice_is(emma_copy):
    ours = load_voice(f"af_heart:0.25,{emma_copy}:0.75")
    reference = 0.25 * load_voice("af_heart").astype(np.float64) + 0.75 * load_voice("bf_emma").astype(np.float64)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(
        load_voice(f"{emma_copy}(1)+af_heart(3)"), load_voice(f"af_heart:0.75,{emma_copy}:0.25")
    )


def test_a_voices_directory_lists_its_files_by_name(emma_copy, monkeypatch):
    monkeypatch.setenv(packs.VOICES_ENV, str(emma_copy.parent))
    listed = {v.name: v for v in list_voices()}
    assert listed["narrator"].source == "voices-dir" and listed["narrator"].language == "b"
    assert len(listed) == 55  # the 54 stock voices and this one
    np.testing.assert_array_equal(load_voice("narrator"), load_voice("bf_emma"))
    assert voice_language("narrator") == "b" and voice_language("narrator:1,af_heart:1") == "b"


def test_a_stock_name_in_a_voices_directory_does_not_hide_the_stock_voice(tmp_path):
    save_voice(tmp_path / "af_heart.npy", load_voice("bf_emma"), {"language": "b"})
    add_voice_dir(tmp_path)
    np.testing.assert_array_equal(load_voice("af_heart"), np.asarray(packs.sdist.read_pack("af_heart")))
    assert voice_language("af_heart") == "a"


def test_many_voice_tags_with_a_voices_directory_are_refused_within_a_second(tmp_path):
    """Each voice tag resolves its name: with a voices directory that once listed every voice per tag (6,000 tags
    took 35 s with 20 files). Work per request stays bounded; a file added later is still found."""
    import time

    from kokoro_tvm_ext.speech.ssml import parse_ssml

    for i in range(20):
        save_voice(tmp_path / f"mine{i}.npy", load_voice("af_heart"), {"language": "a"})
    add_voice_dir(tmp_path)
    for name in ("af_heart", "mine3"):
        start = time.thread_time()  # the work, not a loaded host's wall time
        with pytest.raises(InvalidInputError, match="more than 10000 times"):
            parse_ssml("<speak>" + f'<voice name="{name}">a</voice>b' * 6_000 + "</speak>", "a")
        assert time.thread_time() - start < 1.0, name
    save_voice(tmp_path / "late.npy", load_voice("bf_emma"), {"language": "b"})
    assert voice_language("late") == "b"


def test_without_a_sidecar_the_language_must_be_given(emma_copy):
    emma_copy.with_suffix(".json").unlink()
    with pytest.raises(InvalidInputError, match=r"narrator.npy has no narrator.json beside it .* give the language"):
        voice_language(str(emma_copy))
    assert read_sidecar(emma_copy) is None
    assert load_voice(str(emma_copy)).shape == (510, 1, 256)  # the pack itself still loads (phonemes, --lang)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (np.zeros((510, 1, 128), np.float32), r"has shape \(510, 1, 128\), expected \[510, 1, 256\]"),
        (np.full((510, 1, 256), np.nan, np.float32), "contains NaN or infinite values"),
    ],
)
def test_a_bad_pack_is_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.npy"
    np.save(path, content)
    with pytest.raises(CorruptAssetError, match=message):
        load_voice(str(path))
    with pytest.raises(CorruptAssetError, match=message):
        load_voice(f"af_heart:0.5,{path}:0.5")
    with pytest.raises(InvalidInputError):
        save_voice(tmp_path / "out.npy", content, {"language": "a"})
    assert not (tmp_path / "out.npy").exists() and not (tmp_path / "out.json").exists()


def test_a_sidecar_without_a_language_is_named(emma_copy):
    emma_copy.with_suffix(".json").write_text('{"provenance": {}}')
    with pytest.raises(CorruptAssetError, match=r"narrator.json has no language"):
        voice_language(str(emma_copy))


def test_a_missing_file_in_a_blend_is_named(tmp_path):
    with pytest.raises(UnknownVoiceError, match=r"voice file .*nope.npy: no such file"):
        load_voice(f"af_heart:0.5,{tmp_path}/nope.npy:0.5")


def test_a_missing_voices_directory_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="no such directory"):
        add_voice_dir(tmp_path / "nowhere")
