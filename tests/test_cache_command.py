"""`kokoro-tvm cache`: the compiled entries another version made are listed and pruned; the entries the loader
looks up for this install (its own key functions name them), other targets' entries of this version, voices and a
compile in progress stay."""

from __future__ import annotations

import pytest

from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.model.artifact_cache import artifact_key, cached_artifact_dir, compiler_fingerprint, target_spec
from kokoro_tvm_ext.model.speaker_encoder.compile import artifact_dir, package_fingerprint
from kokoro_tvm_ext.support.versions import installed_versions


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(root))
    weights = "f" * 24
    kept = [
        cached_artifact_dir(artifact_key(weights, precision="int8")),  # what `say --precision int8` loads here
        cached_artifact_dir(artifact_key(weights, target=target_spec("x86-64-v3"))),  # this version, another target
        artifact_dir(),  # the speaker encoder's
    ]
    fingerprint = compiler_fingerprint()
    stale = [
        kept[0].with_name(kept[0].name.replace(fingerprint, "0123456789ab")),  # another kokoro-tvm-ext
        kept[0].with_name(kept[0].name.replace(f"-tvm{installed_versions()['apache-tvm']}-", "-tvm0.26.0-")),  # TVM
        kept[2].with_name(kept[2].name.replace(package_fingerprint(), "0123456789ab")),  # another encoder
    ]
    for entry in kept + stale:
        entry.mkdir(parents=True)
        (entry / "kokoro.so").write_bytes(b"\0" * 250_000)
    untouched = [root / "voices" / "af_heart.pt", root / "artifacts" / f".{kept[0].name}.x1y2" / "part"]
    for path in untouched:
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\0" * 1000)
    return kept, stale, untouched


def test_the_listing_marks_other_versions_and_deletes_nothing(cache, capsys):
    kept, stale, untouched = cache
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    for entry in kept:
        assert f"{entry.name}  (this version)" in out
    for entry in stale:
        assert f"{entry.name}  (another version: --prune deletes it)" in out
    assert "3 entries of other versions hold 732.4 KiB: kokoro-tvm cache --prune deletes them" in out
    assert "voices 1000 bytes" in out
    assert all(p.exists() for p in kept + stale + untouched)


def test_prune_deletes_only_the_other_versions_entries(cache, capsys):
    kept, stale, untouched = cache
    assert main(["cache", "--prune"]) == 0
    assert "deleted 3 entries of other versions: 732.4 KiB freed" in capsys.readouterr().out
    assert all(p.exists() for p in kept + untouched) and not any(p.exists() for p in stale)
    assert not list(kept[0].parent.glob(".pruning-*"))
    assert main(["cache", "--prune"]) == 0
    assert "nothing to prune" in capsys.readouterr().out


def test_no_cache_yet(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "none"))
    assert main(["cache", "--prune"]) == 0
    assert "no cache yet at" in capsys.readouterr().out and not (tmp_path / "none").exists()
