"""precision="bf16" through TVM: torch modules → our pipeline → the bf16 kernels, against torch.

With AVX512-BF16 the kernels compute on bf16-rounded inputs and weights with f32
accumulation, so they must match torch on those rounded values tightly, and torch
on the original f32 values loosely. Without it (or with KOKORO_TVM_EXT_NO_BF16=1)
they unpack the weights and run in f32.
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
NATIVE = bool(tvm.get_global_func("kokoro_tvm_ext.bf16_native")())
needs_bf16 = pytest.mark.skipif(not NATIVE, reason="the CPU lacks AVX512-BF16 (or KOKORO_TVM_EXT_NO_BF16 is set)")


def run_layer(layer, x, dtype):
    """The layer in ``dtype`` on ``x`` and weights rounded to bf16 or not."""
    with torch.no_grad():
        ref = OneLayer(layer).to(dtype)
        return ref(torch.from_numpy(x).to(dtype)).double().numpy()


def with_weight(module, weight, bias_scale=1.0):
    """A copy of ``module`` with another weight (and its bias scaled)."""
    copy = type(module).__new__(type(module))
    copy.__dict__ = module.__dict__.copy()
    copy._parameters = dict(module._parameters)
    copy._parameters["weight"] = torch.nn.Parameter(weight)
    if module.bias is not None:
        copy._parameters["bias"] = torch.nn.Parameter(module.bias.detach() * bias_scale)
    return copy


def bf16_round(module):
    """Weights rounded to bf16 as the packer does; the bias stays f32 (TVM adds it)."""
    return with_weight(module, module.weight.detach().to(torch.bfloat16).float())


LAYERS = {
    "conv 5->7 k3 d2": lambda: torch.nn.Conv1d(5, 7, 3, padding=2, dilation=2, bias=False),
    "conv 33->17 k7 d3": lambda: torch.nn.Conv1d(33, 17, 7, padding=9, dilation=3),
    "conv 22->24 k12 s6": lambda: torch.nn.Conv1d(22, 24, 12, stride=6, padding=3),
    "convT 20->9 k20 s10": lambda: torch.nn.ConvTranspose1d(20, 9, 20, stride=10, padding=5),
    "convT 9->6 k4 s2 op1": lambda: torch.nn.ConvTranspose1d(9, 6, 4, stride=2, padding=1, output_padding=1),
    "linear 37->65": lambda: torch.nn.Linear(37, 65),
}


@pytest.fixture(scope="module", params=list(LAYERS))
def compiled(request):
    torch.manual_seed(hash(request.param) % 1000)
    layer = LAYERS[request.param]().eval()
    L = torch.export.Dim("L", min=12, max=4096)
    c_in = layer.in_features if isinstance(layer, torch.nn.Linear) else layer.in_channels
    ep = torch.export.export(OneLayer(layer), (torch.randn(1, c_in, 40),), dynamic_shapes=({2: L},))
    mod = kokoro_tvm_ext.from_exported_program(ep)
    exe = tvm.compile(mod, target=TARGET, relax_pipeline=cpu_pipeline(TARGET, precision="bf16"))
    return layer, c_in, mod, relax.VirtualMachine(exe, tvm.cpu())


def test_layers_go_to_the_bf16_kernels(compiled):
    _, _, mod, _ = compiled
    with TARGET:
        text = tvm.transform.Sequential(plugin_passes(precision="bf16"))(mod).script(show_meta=False)
    assert text.count('_bf16"') == 1, text
    assert 'dtype="bfloat16"' not in text  # weights are constants, not parameters


@pytest.mark.parametrize("length", [12, 37, 301])
def test_bf16_kernels_match_torch(compiled, rng, length):
    layer, c_in, _, vm = compiled
    x = rng.standard_normal((1, c_in, length)).astype(np.float32)
    got = vm["main"](tvm.runtime.tensor(x))[0].numpy().astype(np.float64)
    exact = run_layer(layer, x, torch.float64)
    # The size of each output's terms: the layer on |x| and |w|, no bias.
    abs_layer = with_weight(layer, layer.weight.detach().abs(), bias_scale=0.0)
    scale = run_layer(abs_layer, np.abs(x), torch.float64) + 1e-3
    # Loose: bf16 keeps 8 significant bits of every input.
    assert np.all(np.abs(got - exact) <= 1e-2 * scale), np.max(np.abs(got - exact) / scale)
    if NATIVE:
        # Tight: torch in float64 on the bf16-rounded input and weights.
        rounded_x = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
        want = run_layer(bf16_round(layer), rounded_x, torch.float64)
        assert np.all(np.abs(got - want) <= 2e-6 * scale), np.max(np.abs(got - want) / scale)


@needs_bf16
def test_packer_and_kernel_errors_reach_python():
    # Tap-major pairs: 2 taps x 2 pairs of 3 channels (the fourth zero); 3 taps need 6.
    assert_packer_and_kernel_errors_reach_python("bf16", "bfloat16", (1, 1, 4, 8, 2), r"\[1, 1, 6, 8, 2\]")


FALLBACK = """
import numpy as np, torch, tvm
from tvm import relax
import kokoro_tvm_ext
from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline
assert not tvm.get_global_func("kokoro_tvm_ext.bf16_native")()
torch.manual_seed(0)
conv = torch.nn.Conv1d(6, 10, 5, padding=2).eval()
ep = torch.export.export(conv, (torch.randn(1, 6, 50),))
target = tvm.target.Target({"kind": "llvm"})
exe = tvm.compile(kokoro_tvm_ext.from_exported_program(ep), target=target,
                  relax_pipeline=cpu_pipeline(target, precision="bf16"))
x = torch.randn(1, 6, 50)
got = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x.numpy()))[0].numpy()
with torch.no_grad():
    w = conv.weight.to(torch.bfloat16).double()
    want = torch.nn.functional.conv1d(x.double(), w, conv.bias.double(), padding=2).numpy()
print("max error", float(np.abs(got - want).max()))
"""


def test_fallback_runs_f32_on_the_unpacked_weights():
    """KOKORO_TVM_EXT_NO_BF16=1: the same artifact computes in f32 with the bf16 weights."""
    # Only the f32 accumulation differs: x is not rounded.
    assert fallback_max_error(FALLBACK, "KOKORO_TVM_EXT_NO_BF16") < 1e-5
