"""The .pt reader against torch.load, its refusals, and the weights' fetch-and-cache path."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kokoro_tvm_ext.model.speaker_encoder import weights as encoder_weights
from kokoro_tvm_ext.model.speaker_encoder.pt_reader import read_pt
from kokoro_tvm_ext.model.speaker_encoder.spec import WEIGHT_SHAPES
from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError


@pytest.fixture(scope="module")
def pretrained(resemblyzer) -> Path:
    """Resemblyzer's own checkpoint, as the [dev] extra installs it (the legacy torch format)."""
    return Path(resemblyzer.__file__).parent / "pretrained.pt"


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(encoder_weights.SOURCE_ENV, raising=False)
    return tmp_path / "cache"


def _assert_same(ours, theirs, torch):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, np.ndarray) and ours.dtype == theirs.detach().numpy().dtype
        np.testing.assert_array_equal(ours, theirs.detach().numpy())
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for key in theirs:
            _assert_same(ours[key], theirs[key], torch)
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b, torch)
    else:
        assert ours == theirs


def test_resemblyzers_legacy_checkpoint_reads_as_torch_loads_it(pretrained):
    torch = pytest.importorskip("torch")
    theirs = torch.load(pretrained, map_location="cpu", weights_only=False)
    _assert_same(read_pt(pretrained), theirs, torch)  # the optimizer's state too


def test_a_zip_checkpoint_reads_as_torch_loads_it(tmp_path):
    """torch >= 1.6's format: dtypes, a view into a shared storage, a transposed (strided) tensor, a Parameter."""
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state = {
        "f32": base,
        "view": base[1:3, 2:5],
        "transposed": base.t(),
        "f64": torch.linspace(0, 1, 5, dtype=torch.float64),
        "i64": torch.tensor([1, -2, 3]),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False]),
        "f16": torch.tensor([0.5, 2.0], dtype=torch.float16),
        "param": torch.nn.Parameter(torch.ones(3)),
        "nested": [{"scalar": torch.tensor(7.0)}, 3, "text"],
    }
    path = tmp_path / "state.pt"
    torch.save(state, path)
    _assert_same(read_pt(path), torch.load(path, weights_only=False), torch)


def test_a_checkpoint_needing_other_code_is_refused_by_name(tmp_path):
    class Runs:
        def __reduce__(self):
            import os

            return (os.system, ("echo should-not-run",))

    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(Runs(), protocol=2))
    with pytest.raises(CorruptAssetError, match=r"system, which is refused"):
        read_pt(path)
    archive = tmp_path / "evil_zip.pt"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("evil/data.pkl", pickle.dumps(Runs(), protocol=2))
    with pytest.raises(CorruptAssetError, match="refused"):
        read_pt(archive)


def test_damaged_and_foreign_files_are_refused_in_one_line(tmp_path, pretrained):
    data = pretrained.read_bytes()
    cases = {
        "truncated.pt": data[: len(data) // 2],
        "header_only.pt": data[:100],
        "text.pt": b"not a checkpoint at all\n" * 10,
        "empty.pt": b"",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CorruptAssetError) as err:
            read_pt(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    zip_path = tmp_path / "other.zip"
    with zipfile.ZipFile(zip_path, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(CorruptAssetError, match="not a PyTorch checkpoint"):
        read_pt(zip_path)


def test_another_models_checkpoint_is_refused_naming_the_tensor(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "other_model.pt"
    torch.save({"model_state": {"lstm.weight_ih_l0": torch.zeros(1024, 80)}}, path)
    with pytest.raises(CorruptAssetError, match=r"lstm\.weight_ih_l0 is float32 \(1024, 80\)"):
        encoder_weights.read_checkpoint(path)


def test_weights_from_a_local_checkpoint_are_verified_and_cached_as_safetensors(isolated_cache, pretrained):
    torch = pytest.importorskip("torch")
    state = encoder_weights.load_weights(source=pretrained)
    theirs = torch.load(pretrained, map_location="cpu", weights_only=False)["model_state"]
    assert set(state) == set(WEIGHT_SHAPES)
    for name, value in state.items():
        np.testing.assert_array_equal(value, theirs[name].numpy())
    cached = encoder_weights.weights_file()
    assert cached.is_relative_to(isolated_cache) and cached.suffix == ".safetensors"
    again = encoder_weights.load_weights()  # from the cache: no source, no download
    for name in state:
        np.testing.assert_array_equal(again[name], state[name])


def test_a_wrong_file_given_as_the_source_is_refused(isolated_cache, tmp_path):
    fake = tmp_path / "Resemblyzer-0.1.4-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("resemblyzer/pretrained.pt", b"x")
    with pytest.raises(CorruptAssetError, match="is not Resemblyzer's .*sha256"):
        encoder_weights.load_weights(source=fake)
    other = tmp_path / "pretrained.pt"
    other.write_bytes(b"other weights")
    with pytest.raises(CorruptAssetError, match="is not Resemblyzer 0.1.4's"):
        encoder_weights.load_weights(source=other)
    with pytest.raises(MissingAssetError, match="does not exist"):
        encoder_weights.load_weights(source=tmp_path / "missing.whl")
    assert not encoder_weights.weights_file().exists()  # nothing cached on a refusal


def test_offline_the_error_names_the_local_file_option(isolated_cache, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds nothing, as without PyPI access
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(MissingAssetError, match=r"could not fetch.*KOKORO_TVM_RESEMBLYZER") as err:
        encoder_weights.load_weights()
    assert "\n" not in str(err.value)


def test_first_use_fetches_resemblyzers_wheel_with_pip(isolated_cache, pretrained):
    """The real path: pip downloads the wheel (16 MB), its sha256 and its checkpoint's are checked."""
    torch = pytest.importorskip("torch")
    try:
        state = encoder_weights.load_weights()
    except MissingAssetError as err:
        if "could not fetch" in str(err):
            pytest.skip(f"no PyPI access: {err}")
        raise
    theirs = torch.load(pretrained, map_location="cpu", weights_only=False)["model_state"]
    for name, value in state.items():
        np.testing.assert_array_equal(value, theirs[name].numpy())
    assert encoder_weights.weights_file().is_file()
