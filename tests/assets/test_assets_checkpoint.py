"""Checkpoints without torch: reading .safetensors (and .pth with torch) into KModel's flat names,
refusing broken files in one line, the bundled KModel layout, and `kokoro-tvm weights convert`.

Small hand-made checkpoints; the real weights are tested in test_assets_weights.py."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from kokoro_tvm_ext import errors
from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.model.weights import find_weights, layout
from kokoro_tvm_ext.model.weights.files import check_fits, read_checkpoint, safetensors_shapes
from kokoro_tvm_ext.model.weights.kmodel import describe_kmodel

RNG = np.random.default_rng(0)
EMB = "bert.embeddings.word_embeddings.weight"
UPS = "decoder.generator.ups.0.weight_g"


def raw_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> Path:
    """A safetensors file written by hand from the format's definition (little-endian u64 header
    length, JSON header with each tensor's dtype, shape and byte range, then the bytes), so that a
    test can hold dtypes numpy lacks (BF16, F8) independently of the library under test."""
    header, data = {}, b""
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)
    return path


def one_line_error(exc_info, *parts: str) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg, msg
    for part in parts:
        assert part in msg, (part, msg)
    return msg


# ---------------------------------------------------------------------------------------------
# Reading


def test_safetensors_names_in_every_layout_come_back_flat_and_float32(tmp_path):
    emb = RNG.standard_normal((4, 3)).astype(np.float32)
    ups = RNG.standard_normal((2, 1, 1)).astype(np.float16)
    lstm = RNG.standard_normal(5)  # float64
    layouts = {
        "flat": {EMB: emb, UPS: ups, "predictor.lstm.bias_ih_l0": lstm},
        "module": {"module." + EMB: emb, "module." + UPS: ups, "module.predictor.lstm.bias_ih_l0": lstm},
        "hexgrad": {  # hexgrad's grouped names, flattened: <group>.module.<key>
            "bert.module.embeddings.word_embeddings.weight": emb,
            "decoder.module.generator.ups.0.weight_g": ups,
            "predictor.module.lstm.bias_ih_l0": lstm,
        },
    }
    for name, tensors in layouts.items():
        path = tmp_path / f"{name}.safetensors"
        save_file(tensors, path)
        got = read_checkpoint(path)
        assert sorted(got) == sorted([EMB, UPS, "predictor.lstm.bias_ih_l0"]), name
        assert all(v.dtype == np.float32 for v in got.values()), name
        np.testing.assert_array_equal(got[EMB], emb)
        np.testing.assert_array_equal(got[UPS], ups.astype(np.float32))  # float16 -> float32 is exact
        np.testing.assert_array_equal(got["predictor.lstm.bias_ih_l0"], lstm.astype(np.float32))


def test_bfloat16_is_widened_exactly_and_computed_buffers_are_dropped(tmp_path):
    # bfloat16 is float32's upper 16 bits: 1.5 = 0x3FC0_0000, -2.0 = 0xC000_0000, 3.140625 = 0x4049_0000.
    path = raw_safetensors(
        tmp_path / "bf16.safetensors",
        {
            UPS: ("BF16", [3, 1, 1], struct.pack("<3H", 0x3FC0, 0xC000, 0x4049)),
            "bert.embeddings.position_ids": ("I64", [1, 2], struct.pack("<2q", 0, 1)),  # KModel computes it
        },
    )
    got = read_checkpoint(path)
    assert list(got) == [UPS]
    assert got[UPS].dtype == np.float32
    np.testing.assert_array_equal(got[UPS].reshape(-1), [1.5, -2.0, 3.140625])


def test_pth_in_hexgrads_layout_reads_as_the_safetensors_does(tmp_path):
    torch = pytest.importorskip("torch")
    emb = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    hexgrad = {
        "bert": {"module.embeddings.word_embeddings.weight": emb, "module.embeddings.position_ids": torch.arange(4)},
        "decoder": {"module.generator.ups.0.weight_g": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)},
    }
    torch.save(hexgrad, tmp_path / "kokoro.pth")
    got = read_checkpoint(tmp_path / "kokoro.pth")
    assert sorted(got) == [EMB, UPS]
    np.testing.assert_array_equal(got[EMB], emb.numpy())
    np.testing.assert_array_equal(got[UPS], np.array([1.5, -2.0], np.float32))


# ---------------------------------------------------------------------------------------------
# Refusals: one line naming the file and the problem


def _good(path: Path) -> Path:
    save_file({EMB: np.ones((64, 8), np.float32), UPS: np.ones(3, np.float32)}, path)
    return path


def _cut(path: Path, keep) -> Path:
    data = _good(path).read_bytes()
    path.write_bytes(keep(data))
    return path


BROKEN = {
    "empty": (lambda p: (p.write_bytes(b""), p)[1], "is empty"),
    "truncated data": (lambda p: _cut(p, lambda d: d[:-100]), "truncated, damaged or not a safetensors file"),
    "truncated header": (lambda p: _cut(p, lambda d: d[:20]), "truncated, damaged or not a safetensors file"),
    "trailing bytes": (lambda p: _cut(p, lambda d: d + b"\0" * 8), "truncated, damaged or not a safetensors file"),
    "not float": (
        lambda p: (save_file({EMB: np.ones((2, 2), np.int32)}, p), p)[1],
        f"{EMB} holds int32 values; KModel's weights are float",
    ),
    "float8": (
        lambda p: raw_safetensors(p, {UPS: ("F8_E4M3", [2], b"\x38\x40")}),
        f"{UPS} is F8_E4M3; KModel's weights are read from F32, F16, BF16 or F64",
    ),
    "NaN": (
        lambda p: (save_file({EMB: np.array([[1.0, np.nan], [np.nan, 0]], np.float32)}, p), p)[1],
        f"{EMB} holds 2 NaN or infinite values",
    ),
    "float64 beyond float32": (
        lambda p: (save_file({UPS: np.array([1e39, 1.0])}, p), p)[1],
        f"{UPS} holds 1 NaN or infinite values",
    ),
    "unknown group": (
        lambda p: (save_file({"vocoder.conv.weight": np.ones(2, np.float32)}, p), p)[1],
        "has entries KModel does not know: vocoder",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_safetensors_are_refused_in_one_line(tmp_path, case):
    make, problem = BROKEN[case]
    path = make(tmp_path / "w.safetensors")
    with pytest.raises(errors.CorruptAssetError) as err:
        read_checkpoint(path)
    one_line_error(err, str(path), problem)


def test_unknown_extension_names_the_two_accepted(tmp_path):
    for name in ("kokoro.onnx", "weights"):
        path = tmp_path / name
        path.write_bytes(b"x")
        for call in (read_checkpoint, find_weights):
            with pytest.raises(errors.CorruptAssetError) as err:
                call(path)
            one_line_error(err, str(path), ".safetensors", ".pth")


def test_the_speech_layers_old_names_for_the_weights_still_work_and_name_their_successors(isolated):
    import kokoro_tvm_ext.speech as speech
    from kokoro_tvm_ext.model.weights import Weights, load_kmodel

    path = _good(isolated / "w.safetensors")
    with pytest.warns(DeprecationWarning, match=r"speech\.resolve is deprecated; use kokoro_tvm_ext\.model\.weights"):
        found = speech.resolve(path)
    assert isinstance(found, Weights) and (found.source, found.path) == ("argument", path)
    with pytest.warns(DeprecationWarning, match=r"find_weights\(path\)\.ensure_file\(\)"):
        assert speech.resolve_weights(path) == path
    with pytest.warns(DeprecationWarning, match=r"use kokoro_tvm_ext\.model\.weights\.load_kmodel"):
        assert speech.load_model is load_kmodel
    with pytest.warns(DeprecationWarning, match=r"use kokoro_tvm_ext\.model\.weights\.Weights"):
        assert speech.ResolvedWeights is Weights
    with pytest.raises(AttributeError, match="no attribute 'resolved'"):
        speech.resolved  # noqa: B018


def test_truncated_cached_rebuild_is_caught_from_its_header(tmp_path):
    path = _cut(tmp_path / "w.safetensors", lambda d: d[:-1])
    with pytest.raises(errors.CorruptAssetError, match="cannot load weights file .*truncated"):
        safetensors_shapes(path)
    assert safetensors_shapes(_good(tmp_path / "ok.safetensors")) == {EMB: ((64, 8), "F32"), UPS: ((3,), "F32")}


def test_check_fits_names_wrong_shapes_missing_and_unexpected_tensors():
    expected = {EMB: (178, 128), UPS: (256, 1, 1), "bert.pooler.bias": (768,)}
    check_fits(dict(expected), "w", expected)
    with pytest.raises(errors.CorruptAssetError) as err:
        check_fits({EMB: (180, 128), UPS: (256, 1, 1), "bert.extra": (1,)}, "weights x.safetensors", expected)
    one_line_error(
        err,
        "weights x.safetensors do not fit Kokoro-82M's KModel",
        f"wrong shape 1 ({EMB} is (180, 128), not (178, 128))",
        "missing 1 (bert.pooler.bias)",
        "unexpected 1 (bert.extra)",
    )


# ---------------------------------------------------------------------------------------------
# Without torch


NO_TORCH = "import sys; sys.modules['torch'] = None  # `import torch` now fails\n"


def test_safetensors_read_without_torch_and_pth_says_what_to_install(tmp_path):
    good = raw_safetensors(tmp_path / "w.safetensors", {UPS: ("BF16", [1], struct.pack("<H", 0x3FC0))})
    (tmp_path / "w.pth").write_bytes(b"PK\x03\x04 not needed: torch is missing")
    script = NO_TORCH + (
        "from kokoro_tvm_ext.model.weights.files import read_checkpoint\n"
        f"print(read_checkpoint({str(good)!r})[{UPS!r}].tolist())\n"
        "from kokoro_tvm_ext.cli import main\n"
        f"sys.exit(main(['weights', 'convert', {str(tmp_path / 'w.pth')!r}, {str(tmp_path / 'out.safetensors')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[1.5]", proc.stderr[-2000:]
    assert proc.returncode == 3, proc.stderr[-2000:]
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"reading the .pth checkpoint {tmp_path / 'w.pth'} needs PyTorch" in err
    assert 'pip install "kokoro-tvm-ext[compile]"' in err and "kokoro-tvm weights convert IN.pth OUT.safetensors" in err
    assert not (tmp_path / "out.safetensors").exists()


def test_a_safetensors_checkpoint_without_safetensors_installed_says_what_to_install(tmp_path):
    """The bare wheel (no `speak` extra) given a .safetensors: `kokoro-tvm say --weights` ends in one line."""
    good = raw_safetensors(tmp_path / "w.safetensors", {UPS: ("BF16", [1], struct.pack("<H", 0x3FC0))})
    script = (
        "import sys; sys.modules['safetensors'] = None  # `import safetensors` now fails\n"
        "from kokoro_tvm_ext.cli import main\n"
        f"sys.exit(main(['say', 'Hi.', '--weights', {str(good)!r}, '-o', {str(tmp_path / 'x.wav')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    err = proc.stderr.strip()
    assert proc.returncode == 3 and "Traceback" not in err, err
    line = err.splitlines()[-1]  # after the notes on what it was doing
    assert f"reading the .safetensors checkpoint {good} needs safetensors" in line
    assert "pip install 'kokoro-tvm-ext[speak]'" in line
    assert not (tmp_path / "x.wav").exists()


# ---------------------------------------------------------------------------------------------
# The bundled KModel layout


def test_bundled_layout_is_what_kokoro_builds(bundled_config):
    pytest.importorskip("torch")
    pytest.importorskip("kokoro")
    assert json.loads(layout.LAYOUT_FILE.read_text(encoding="utf-8")) == describe_kmodel(bundled_config)
    bundled = layout.layout_for(bundled_config)
    assert len(bundled.shapes) == 688 and bundled.shapes[EMB] == (178, 128)
    assert "bert.embeddings.position_ids" in bundled.computed_buffers
    assert "decoder.generator.stft.window" in bundled.computed_buffers  # disable_complex=True's STFT


def test_layout_refuses_another_architecture(bundled_config):
    other = {**bundled_config, "n_token": 200, "hidden_dim": 256}
    with pytest.raises(errors.CorruptAssetError, match="differs from Kokoro-82M's in hidden_dim, n_token"):
        layout.layout_for(other)
    assert layout.layout_for({**bundled_config, "vocab": {"a": 1}}) is layout.bundled_layout()


# ---------------------------------------------------------------------------------------------
# kokoro-tvm weights convert


def test_convert_pth_to_safetensors_round_trips(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    emb = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))
    torch.save({"bert": {"module.embeddings.word_embeddings.weight": emb}}, tmp_path / "in.pth")
    out = tmp_path / "out.safetensors"
    assert main(["weights", "convert", str(tmp_path / "in.pth"), str(out)]) == 0
    assert f"wrote {out}: 1 tensors" in capsys.readouterr().out
    got = read_checkpoint(out)
    assert list(got) == [EMB]
    np.testing.assert_array_equal(got[EMB], emb.numpy())


def test_convert_refuses_a_bad_input_or_output_and_writes_nothing(tmp_path, capsys):
    bad = _cut(tmp_path / "in.safetensors", lambda d: d[:-3])
    out = tmp_path / "out.safetensors"
    assert main(["weights", "convert", str(bad), str(out)]) == 3
    assert main(["weights", "convert", str(_good(tmp_path / "ok.safetensors")), str(tmp_path / "out.pth")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"kokoro-tvm weights: cannot load weights file {bad}: it is truncated")
    assert err[1] == f"kokoro-tvm weights: the output {tmp_path / 'out.pth'} must end in .safetensors"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors", "ok.safetensors"]
