"""precision="int8" through TVM: torch modules → our pipeline → the int8 kernels, against references.

With AVX512-VNNI the kernels quantize their inputs to u8 (matmul: a scale and zero
point per row; the convolutions: per tile of columns), multiply by int8 weights
(symmetric, a scale per output channel) with int32 sums and dequantize. matmul is
checked bit for bit against that arithmetic in numpy; the convolutions against torch
in float64 within the quantization bound. Without VNNI (or with
KOKORO_TVM_EXT_NO_VNNI=1) the same calls run the f32 kernels on the dequantized weights.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import tvm  # noqa: E402
from precision_modes import OneLayer, assert_packer_and_kernel_errors_reach_python, fallback_max_error  # noqa: E402
from tvm import relax  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline, plugin_passes  # noqa: E402

TARGET = tvm.target.Target({"kind": "llvm"})
NATIVE = bool(tvm.get_global_func("kokoro_tvm_ext.int8_native")())


def channel_scales(w: np.ndarray, axis: int) -> np.ndarray:
    """The packer's per-output-channel scales: max |w| / 127 over every other axis."""
    other = tuple(i for i in range(w.ndim) if i != axis)
    return (np.abs(w).max(axis=other) / np.float32(127)).astype(np.float32)


def quantize_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values, scales), as pack_int8 quantizes random (off-grid) weights."""
    s = channel_scales(w, axis)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int32)
    return q, s.reshape(shape)


def test_matmul_int8_is_the_int8_arithmetic_bit_for_bit(rng):
    """Each row of x quantized to u8 by its own range, int32 sums, dequantized in f32, the bias added."""
    rows, k, n = 7, 301, 45
    x = (rng.standard_normal((rows, k)) * np.arange(1, rows + 1)[:, None]).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    packed = tvm.get_global_func("kokoro_tvm_ext.pack_int8")("matmul", 1, tvm.runtime.tensor(w))
    assert packed.dtype == "int8"
    out = tvm.runtime.tensor(np.zeros((rows, n), np.float32))
    matmul = tvm.get_global_func("kokoro_tvm_ext.matmul_int8")
    matmul(1, tvm.runtime.tensor(x), packed, tvm.runtime.tensor(bias), out)
    qw, sw = quantize_weights(w, axis=1)
    if not NATIVE:
        np.testing.assert_allclose(out.numpy(), x @ (qw * sw) + bias, rtol=1e-5, atol=1e-4)
        return
    f32 = np.float32
    lo, hi = np.minimum(x.min(axis=1), 0), np.maximum(x.max(axis=1), 0)
    sx = ((hi - lo) / f32(255)).astype(f32)
    zero = np.clip(np.rint(-lo / sx), 0, 255).astype(np.int32)
    inv = (f32(1) / sx).astype(f32)
    qx = np.clip(np.rint((x * inv[:, None]).astype(f32)).astype(np.int32) + zero[:, None], 0, 255)
    sums = qx.astype(np.int64) @ qw.astype(np.int64) - zero[:, None] * qw.sum(axis=0)[None, :]
    want = bias[None, :] + sums.astype(f32) * (sx[:, None] * sw.reshape(1, n)).astype(f32)
    np.testing.assert_array_equal(out.numpy(), want.astype(f32))


LAYERS = {
    # a residual block's shape: Winograd's in fp32, int8 here
    "conv 33->40 k3 d3": lambda: torch.nn.Conv1d(33, 40, 3, padding=3, dilation=3),
    "convT 40->36 k20 s10": lambda: torch.nn.ConvTranspose1d(40, 36, 20, stride=10, padding=5),
    "linear 37->65": lambda: torch.nn.Linear(37, 65),
    # fewer than 32 input channels: stays f32 (pack_int8.py)
    "conv 22->128 k1": lambda: torch.nn.Conv1d(22, 128, 1),
}


@pytest.fixture(scope="module", params=list(LAYERS))
def compiled(request):
    torch.manual_seed(sum(map(ord, request.param)))
    layer = LAYERS[request.param]().eval()
    L = torch.export.Dim("L", min=12, max=4096)
    c_in = layer.in_features if isinstance(layer, torch.nn.Linear) else layer.in_channels
    ep = torch.export.export(OneLayer(layer), (torch.randn(1, c_in, 40),), dynamic_shapes=({2: L},))
    mod = kokoro_tvm_ext.from_exported_program(ep)
    exe = tvm.compile(mod, target=TARGET, relax_pipeline=cpu_pipeline(TARGET, precision="int8"))
    int8 = min(c_in, layer.out_features if isinstance(layer, torch.nn.Linear) else layer.out_channels) >= 32
    return layer, c_in, mod, relax.VirtualMachine(exe, tvm.cpu()), int8


def test_layers_with_32_channels_or_more_go_to_the_int8_kernels(compiled):
    _, _, mod, _, int8 = compiled
    with TARGET:
        text = tvm.transform.Sequential(plugin_passes(precision="int8"))(mod).script(show_meta=False)
    assert text.count('_int8"') == int(int8) and "winograd" not in text, text


def run(layer, x: np.ndarray, weight=None, bias_scale=1.0) -> np.ndarray:
    """The layer in float64, optionally with another weight and its bias scaled."""
    with torch.no_grad():
        w = layer.weight.double() if weight is None else torch.as_tensor(weight).double()
        b = None if layer.bias is None else layer.bias.double() * bias_scale
        xt = torch.from_numpy(x).double()
        if isinstance(layer, torch.nn.Linear):
            return torch.nn.functional.linear(xt.transpose(1, 2), w, b).numpy()
        if isinstance(layer, torch.nn.ConvTranspose1d):
            return torch.nn.functional.conv_transpose1d(xt, w, b, layer.stride, layer.padding).numpy()
        return torch.nn.functional.conv1d(xt, w, b, layer.stride, layer.padding, layer.dilation).numpy()


@pytest.mark.parametrize("length", [12, 301])
def test_int8_kernels_match_torch_within_the_quantization_bound(compiled, rng, length):
    """Per term |w| dx + |x| dw + dx dw: dx = max|x| / 255 (half a step of a range at most 2 max|x|
    wide), dw = max|w| / 254 (half a step of the largest channel scale)."""
    layer, c_in, _, vm, int8 = compiled
    x = rng.standard_normal((1, c_in, length)).astype(np.float32)
    got = vm["main"](tvm.runtime.tensor(x))[0].numpy().astype(np.float64)
    w = layer.weight.detach().numpy()
    dx, dw = np.abs(x).max() / 255, np.abs(w).max() / 254
    ones_x, ones_w = np.ones_like(x), np.ones_like(w)
    bound = (
        run(layer, ones_x, np.abs(w), 0) * dx
        + run(layer, np.abs(x), ones_w, 0) * dw
        + run(layer, ones_x, ones_w, 0) * dx * dw
    )
    err = np.abs(got - run(layer, x))
    assert np.all(err <= bound * 1.001 + 1e-5), np.max(err / bound)
    # The quantization shows where int8 ran (a test that it did), not where the call stayed f32.
    if NATIVE:
        assert (err.max() > 1e-5) == int8


def test_packer_and_kernel_errors_reach_python():
    # 4 output channels: one panel of 8 rows, 2 quads of the 6 inner values; scales and sums.
    assert_packer_and_kernel_errors_reach_python("int8", "int8", (1, 16 + 8, 4), r"\[1, 32, 4\]")


FALLBACK = """
import numpy as np, tvm
import kokoro_tvm_ext.plugin.passes  # registers the plugin
assert not tvm.get_global_func("kokoro_tvm_ext.int8_native")()
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 6, 50)).astype(np.float32)
w = rng.standard_normal((10, 6, 5)).astype(np.float32)
packed = tvm.get_global_func("kokoro_tvm_ext.pack_int8")("conv1d", 1, tvm.runtime.tensor(w))
out = tvm.runtime.tensor(np.zeros((1, 10, 50), np.float32))
tvm.get_global_func("kokoro_tvm_ext.conv1d_int8")(1, 2, 2, 1, 1, 0, 5, tvm.runtime.tensor(x), packed, out)
s = np.abs(w).max(axis=(1, 2), keepdims=True) / np.float32(127)
deq = (np.rint(w / s) * s).astype(np.float64)
xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (2, 2)))
want = np.stack([np.einsum("ock,ck->o", deq, xp[0, :, t : t + 5]) for t in range(50)], axis=-1)[None]
print("max error", float(np.abs(out.numpy() - want).max()))
"""


def test_without_vnni_the_f32_kernels_run_on_the_dequantized_weights():
    """KOKORO_TVM_EXT_NO_VNNI=1 (as on a CPU without VNNI): f32 on q * scale, so no input quantization."""
    assert fallback_max_error(FALLBACK, "KOKORO_TVM_EXT_NO_VNNI") < 1e-5


def test_the_fallback_notice_is_one_line_once_per_process(caplog, monkeypatch):
    """An int8 artifact loaded where VNNI is missing (or hidden) says so, once, in one line."""
    from kokoro_tvm_ext.model.runtime import cpu_features

    monkeypatch.delenv("KOKORO_TVM_EXT_NO_VNNI", raising=False)
    assert cpu_features.int8_native({"avx512f", "avx512vnni"}, arch="x86_64")
    assert not cpu_features.int8_native({"avx512f"}, "x86_64") and not cpu_features.int8_native(None)
    monkeypatch.setenv("KOKORO_TVM_EXT_NO_VNNI", "1")
    assert not cpu_features.int8_native({"avx512f", "avx512vnni"}, arch="x86_64")
    monkeypatch.setattr(cpu_features, "_int8_noticed", False)
    with caplog.at_level("WARNING", logger="kokoro_tvm_ext"):
        cpu_features.check_cpu({"cpu_features": [], "precision": "int8"}, "an artifact")
        cpu_features.check_cpu({"cpu_features": [], "precision": "int8"}, "an artifact")
    (record,) = caplog.records
    assert "AVX512-VNNI" in record.getMessage() and "\n" not in record.getMessage()
