"""Fused instance-norm kernels build with the wheel's LLVM, with debug info, and match torch.

Regression test for apache/tvm#18585, fixed upstream by apache/tvm#18706 and carried for
older TVM builds as ``patches/0006-llvm-codegen-dbg-value-for-non-pointer-values.patch``.
Before the fix, TVM's LLVM codegen described every let-bound value with a
``#dbg_declare`` record. LLVM 21 and later reject a declare whose location is not an
address ("location of #dbg_declare must be a pointer or int"). The float lets of
instance norm's mean/variance reduction hit this as soon as the norm is fused with what
follows it: ``fused_instance_norm_leaky_relu``, or Kokoro's AdaIN1d
(``(1 + gamma) * instance_norm(x) + beta``, then leaky_relu).

Debug info: TVM 0.27 has no switch for it. The CPU LLVM codegen always emits it (the
``tirx.enable_debug`` PassContext option is registered, but codegen does not read it),
so every build is a debug build. We also build at ``opt-level`` 0, so that the debug
records are still in the LLVM IR that ``inspect_source("ll")`` returns, and check them.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tvm_build import export_and_build, run_vm  # noqa: E402

STYLE_DIM, CHANNELS, FRAMES = 16, 8, 50


class InstanceNormLeakyReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.InstanceNorm1d(CHANNELS, affine=True)

    def forward(self, x):
        return torch.nn.functional.leaky_relu(self.norm(x), 0.2)


class AdaIN1dLeakyReLU(torch.nn.Module):
    """Kokoro's AdaIN1d (instance norm, then a style-driven scale and shift), then leaky_relu."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.InstanceNorm1d(CHANNELS, affine=False)
        self.fc = torch.nn.Linear(STYLE_DIM, 2 * CHANNELS)

    def forward(self, x, style):
        h = self.fc(style).view(style.shape[0], -1, 1)
        gamma, beta = torch.chunk(h, 2, dim=1)
        return torch.nn.functional.leaky_relu((1 + gamma) * self.norm(x) + beta, 0.2)


def _instance_norm_leaky_relu():
    torch.manual_seed(0)
    model = InstanceNormLeakyReLU().eval()
    with torch.no_grad():  # non-trivial affine parameters
        model.norm.weight.normal_()
        model.norm.bias.normal_()
    return model, lambda n: (torch.randn(1, CHANNELS, n),)


def _adain():
    torch.manual_seed(1)
    return AdaIN1dLeakyReLU().eval(), lambda n: (torch.randn(1, CHANNELS, n), torch.randn(1, STYLE_DIM))


MODELS = {"instance_norm+leaky_relu": _instance_norm_leaky_relu, "adain1d+leaky_relu": _adain}


def _close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def _functions(ll: str) -> dict[str, str]:
    """The body of every function defined in an LLVM IR module, by name."""
    bodies = {}
    for match in re.finditer(r"^define [^@\n]*@([\w.]+)\(.*?^}$", ll, re.MULTILINE | re.DOTALL):
        bodies[match.group(1)] = match.group(0)
    return bodies


@pytest.fixture(scope="module")
def llvm_major():
    import tvm

    return tvm.target.codegen.llvm_version_major()


def test_wheel_llvm_has_the_strict_dbg_declare_verifier(llvm_major):
    # LLVM 21 added the verifier rule the old codegen broke; the 0.27 wheel ships LLVM 22.
    assert llvm_major >= 21, f"this regression test needs LLVM >= 21, the wheel has {llvm_major}"


@pytest.mark.parametrize("name", list(MODELS))
def test_fused_instance_norm_builds_with_debug_info_and_matches_torch(name, llvm_major):
    import tvm
    from tvm import relax

    model, make_inputs = MODELS[name]()
    frames = torch.export.Dim("frames", min=2, max=4096)
    dynamic = ({2: frames},) + (None,) * (len(make_inputs(FRAMES)) - 1)

    # The project's default build (tvm.compile's own pipeline, no fusion).
    vm, mod = export_and_build(model, make_inputs(FRAMES), dynamic_shapes=dynamic)
    for n in (FRAMES, 7):
        inputs = make_inputs(n)
        with torch.no_grad():
            want = model(*inputs).numpy()
        _close(run_vm(vm, *[a.numpy() for a in inputs]), want)

    # TVM's CPU pipeline, which fuses the norm with the elementwise tail, unoptimized.
    target = tvm.target.Target({"kind": "llvm", "opt-level": 0})
    exe = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    (llvm_module,) = [m for m in exe.mod.imports if m.kind == "llvm"]
    ll = llvm_module.inspect_source("ll")
    functions = _functions(ll)
    fused = [f for f in functions if f.startswith("fused_") and "instance_norm" in f and "leaky_relu" in f]
    assert fused, f"no fused instance-norm kernel among {sorted(functions)}"
    kernel = functions[fused[0]]
    # Debug info is on, and the kernel's float lets are described by value...
    assert "!DISubprogram(" in ll
    assert re.search(r"#dbg_value\(float ", kernel), f"no float #dbg_value in {fused[0]}"
    # ...while every declare still describes an address (LLVM >= 21 verifies this).
    declares = re.findall(r"#dbg_declare\((\S+)", ll)
    assert declares and all(kind == "ptr" for kind in declares), sorted(set(declares))

    fused_vm = relax.VirtualMachine(exe, tvm.cpu())
    for n in (FRAMES, 300):
        inputs = make_inputs(n)
        with torch.no_grad():
            want = model(*inputs).numpy()
        _close(run_vm(fused_vm, *[a.numpy() for a in inputs]), want)
