"""Prebuilt libraries: an artifact stripped to its library, picked by this CPU, bound to a checkpoint.

The library-only artifact is made from the session's ``small_artifact``. The cache's order (weights cached >
this machine's library > prebuilt > compile) is checked with the bind recorded instead of run: binding itself
(16 s of a loaded CI core for Kokoro's 380 MB) is tested in tests/kokoro/test_checkpoint_binding.py, and from a
library-only artifact end to end by tests/test_wheel.py (`say` from an empty cache with the prebuilt wheel).
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

import kokoro_tvm_ext
from kokoro_tvm_ext.errors import ArtifactMissingError
from kokoro_tvm_ext.model import artifact_cache, prebuilt
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, META, WEIGHTS, holds_checkpoint, read_meta, sealed
from kokoro_tvm_ext.model.runtime.cpu_features import host_features


@pytest.fixture(scope="module")
def library(small_artifact, tmp_path_factory):
    return prebuilt.library_only(small_artifact, tmp_path_factory.mktemp("prebuilt") / "cascadelake")


def test_the_library_only_artifact_keeps_the_library_and_no_weights(small_artifact, library):
    meta, compiled = read_meta(library), read_meta(small_artifact)
    assert meta["library_sha256"] == compiled["library_sha256"]  # the same code
    assert meta["checkpoint_weights"] == {"text_stage": 0, "audio_stage": 0}
    assert meta["weights_index"].keys() == compiled["weights_index"].keys()
    assert not any(meta["weights_index"].values())  # Kokoro's library has no constants of its own
    assert (library / WEIGHTS).read_bytes() == b""  # Kokoro's library has no constants of its own
    assert meta["weights_fingerprint"] is None and not holds_checkpoint(meta) and holds_checkpoint(compiled)
    assert meta["token_embeddings"] == compiled["token_embeddings"]  # where they will be once bound


def test_loading_it_says_it_holds_no_weights_and_how_to_bind_some(library):
    with pytest.raises(ArtifactMissingError) as caught:
        kokoro_tvm_ext.KokoroTVM(library)
    message = str(caught.value)
    assert message.startswith(f"{library} holds a compiled library but no weights") and "\n" not in message
    assert "bind_checkpoint" in message and "kokoro-tvm say" in message


def level(library, directory, **changes):
    """A copy of ``library`` (links to its files) whose meta.json has ``changes``, resealed."""
    directory.mkdir()
    for name in (LIBRARY, WEIGHTS):
        (directory / name).symlink_to(library / name)
    meta = {**json.loads((library / META).read_text()), **changes}
    (directory / META).write_text(json.dumps(sealed(meta)))
    return directory


FEATURES_V3 = ["avx", "avx2", "bmi", "bmi2", "cmov", "f16c", "fma", "sse4.2"]
FEATURES_V4 = FEATURES_V3 + ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]


def test_the_best_level_is_the_one_with_most_features_this_cpu_has(library, tmp_path):
    have = host_features()
    if have is None or not set(FEATURES_V4) <= have or "avx512fp16" in have:
        pytest.skip("needs an AVX-512 CPU without AVX512-FP16 (a Xeon before Sapphire Rapids)")
    v3 = level(library, tmp_path / "x86-64-v3", cpu_features=FEATURES_V3)
    v4 = level(library, tmp_path / "x86-64-v4", cpu_features=FEATURES_V4)
    future = level(library, tmp_path / "future", cpu_features=FEATURES_V4 + ["avx512fp16"])
    older = level(library, tmp_path / "older", cpu_features=FEATURES_V3, kokoro_tvm_ext="0.0.1")
    tir = level(library, tmp_path / "tir", cpu_features=FEATURES_V4, lstm_impl="tir")
    found = prebuilt.best_prebuilt(candidates=[v3, future, older, v4, tir])
    assert found.directory == v4
    assert found.key == f"prebuilt-x86-64-v4-{read_meta(library)['library_sha256'][:12]}"
    assert found.refused == (
        "future: needs avx512fp16, which this CPU lacks",
        f"older: built for kokoro-tvm-ext 0.0.1 on TVM {read_meta(library)['tvm']}, this is "
        f"{read_meta(library)['kokoro_tvm_ext']} on TVM {read_meta(library)['tvm']} (install "
        f"kokoro-tvm-ext-artifacts=={read_meta(library)['kokoro_tvm_ext']})",
        "tir: compiled with the tir LSTM in fp32, not plugin in fp32",
    )
    assert prebuilt.best_prebuilt(candidates=[v3, v4, tir], lstm_impl="tir").directory == tir
    assert prebuilt.best_prebuilt(candidates=[future]).directory is None


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache and a weights file; the cache's binds are recorded (base, entry), each entry a
    link to the base, and a compile fails the test."""
    binds = []

    def record(out, base, checkpoint, fingerprint, quiet):
        binds.append((base, out.name))
        os.symlink(base, out)

    def no_compile(*args):
        raise AssertionError("must not compile")

    monkeypatch.setattr(artifact_cache, "_bind_into", record)
    monkeypatch.setattr(artifact_cache, "_compile_into", no_compile)
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    weights = tmp_path / "these-weights.safetensors"
    weights.write_bytes(b"these weights")
    directory = tmp_path / "cache" / "artifacts"
    directory.mkdir(parents=True)
    return directory, weights, binds


def test_the_cache_binds_to_this_machines_library_before_a_prebuilt_one(cache, library, small_artifact, monkeypatch):
    directory, weights, binds = cache
    monkeypatch.setattr(prebuilt, "installed_prebuilt", lambda: [library])
    out = directory / artifact_cache.artifact_key(hashlib.sha256(b"these weights").hexdigest())
    key = prebuilt.best_prebuilt().key

    # Nothing compiled here: the prebuilt library, into an entry of its own.
    entry = artifact_cache.ensure_artifact(weights, quiet=True)
    assert entry == directory / f"{out.name}-{key}" and binds == [(library, entry.name)]
    assert artifact_cache.ensure_artifact(weights, quiet=True) == entry  # found again
    assert len(binds) == 1

    # A named target: never a prebuilt library (they are picked for this CPU); a compile, here refused.
    with pytest.raises(AssertionError, match="must not compile"):
        artifact_cache.ensure_artifact(weights, target="x86-64-v3", quiet=True)
    assert len(binds) == 1

    # A library compiled on this machine (for other weights, as `kokoro-tvm compile` leaves): preferred.
    (directory / f"other-weights-{artifact_cache.library_key()}").symlink_to(small_artifact)
    assert artifact_cache.ensure_artifact(weights, quiet=True) == out
    assert binds[1] == (directory / f"other-weights-{artifact_cache.library_key()}", out.name)


def test_without_a_library_for_this_cpu_nor_a_compiler_the_error_says_what_to_install(cache, library, monkeypatch):
    directory, weights, binds = cache
    monkeypatch.setattr(artifact_cache, "compiler_installed", lambda: False)
    for installed in ([], [library.parent / "absent"]):
        monkeypatch.setattr(prebuilt, "installed_prebuilt", lambda installed=installed: installed)
        with pytest.raises(ArtifactMissingError) as caught:
            artifact_cache.ensure_artifact(weights, quiet=True)
        message = str(caught.value)
        assert message.startswith("no compiled Kokoro for this CPU") and "\n" not in message
        assert f'pip install "kokoro-tvm-ext-artifacts=={read_meta(library)["kokoro_tvm_ext"]}"' in message
        assert 'pip install "kokoro-tvm-ext[compile]"' in message
        if installed:
            assert "the installed prebuilt libraries do not fit: absent: no compiled Kokoro artifact" in message
    with pytest.raises(ArtifactMissingError) as caught:  # no prebuilt library is for a named target
        artifact_cache.ensure_artifact(weights, target="x86-64-v3", quiet=True)
    assert str(caught.value) == (
        "no compiled Kokoro for the target x86-64-v3 and no compiler to make one: install the compiler (pip install "
        '"kokoro-tvm-ext[compile]")'
    )
    assert binds == [] and list(directory.iterdir()) == []


def test_the_prebuilt_extra_pins_the_companion_to_this_version():
    """The libraries are refused by any other version of kokoro-tvm-ext, so the extra pins the same one."""
    from pathlib import Path

    import tomllib

    from kokoro_tvm_ext._native import __version__

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
    assert project["optional-dependencies"]["prebuilt"] == [f"kokoro-tvm-ext-artifacts=={__version__}"]
    assert prebuilt.DISTRIBUTION == "kokoro-tvm-ext-artifacts"
