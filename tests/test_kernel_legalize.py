"""The Rust library's FLegalize handlers (tvm-ext/src/legalize/): opt-in, scoped, deferring, exact.

Numbers are checked against torch; which calls reach the kernels is read from the legalized IR.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
import tvm
from tvm import relax

import kokoro_tvm_ext

TARGET = tvm.target.Target({"kind": "llvm"})
KERNEL_PREFIX = 'R.call_dps_packed("kokoro_tvm_ext.'


def _module(build) -> tvm.IRModule:
    """A one-function module whose body ``build(bb, *params)`` emits; params from ``build.params``."""
    bb = relax.BlockBuilder()
    params = [relax.Var(name, relax.TensorType(shape, dtype)) for name, shape, dtype in build.params]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(build(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


N = tvm.tirx.Var("n", "int64")


def _convs_and_linear(bb, x, w, wt, a, lw):
    return relax.Tuple(
        [
            bb.emit(relax.op.nn.conv1d(x, w, strides=2, padding=(3, 1), dilation=3, groups=2)),
            bb.emit(relax.op.nn.conv1d_transpose(x, wt, strides=3, padding=2, output_padding=1, groups=2)),
            bb.emit(relax.op.matmul(a, lw)),
        ]
    )


_convs_and_linear.params = [
    ("x", [1, 6, N], "float32"),
    ("w", [4, 3, 5], "float32"),
    ("wt", [6, 5, 7], "float32"),
    ("a", [2, N, 7], "float32"),
    ("lw", [7, 5], "float32"),
]


def _kernel_calls(mod: tvm.IRModule) -> list[str]:
    text = mod.script()
    return sorted(line.split(KERNEL_PREFIX)[1].split('"')[0] for line in text.splitlines() if KERNEL_PREFIX in line)


def _legalized(mod):
    return relax.transform.LegalizeOps()(mod)


def test_handlers_are_registered_functions():
    names = [n for n in kokoro_tvm_ext.registered_functions() if "legalize" in n]
    for op in ("conv1d", "conv1d_transpose", "matmul"):
        assert f"kokoro_tvm_ext.legalize.{op}" in names


def test_importing_the_plugin_changes_no_compile():
    """In a fresh process, TVM's handlers stay in place until the kernels are enabled."""
    code = """
import tvm, tvm.relax
ops = ["relax.nn.conv1d", "relax.nn.conv1d_transpose", "relax.matmul"]
before = [tvm.ir.Op.get(o).get_attr("FLegalize") for o in ops]
import kokoro_tvm_ext
after = [tvm.ir.Op.get(o).get_attr("FLegalize") for o in ops]
assert all(a.same_as(b) for a, b in zip(before, after)), "importing replaced a handler"
kokoro_tvm_ext.enable_kernels()
enabled = [tvm.ir.Op.get(o).get_attr("FLegalize") for o in ops]
assert not any(a.same_as(b) for a, b in zip(before, enabled)), "enable_kernels installed nothing"
import sys
assert "kokoro_tvm_ext.plugin.legalize.slice_scatter" not in sys.modules, "enabling brought in another legalization"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_scope_turns_kernels_on_and_off():
    mod = _module(_convs_and_linear)
    assert _kernel_calls(_legalized(mod)) == []
    assert not kokoro_tvm_ext.kernels_active()
    with kokoro_tvm_ext.kernels_enabled():
        with kokoro_tvm_ext.kernels_enabled():  # nested blocks
            assert kokoro_tvm_ext.kernels_active()
        assert kokoro_tvm_ext.kernels_active()
        assert _kernel_calls(_legalized(mod)) == ["conv1d", "conv1d_transpose", "matmul"]
    assert not kokoro_tvm_ext.kernels_active()
    assert _kernel_calls(_legalized(mod)) == []


def test_scope_is_per_thread():
    mod = _module(_convs_and_linear)
    seen = {}

    def other_thread():
        seen["calls"] = _kernel_calls(_legalized(mod))

    with kokoro_tvm_ext.kernels_enabled():
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen["calls"] == []


def test_enable_kernels_is_process_wide():
    mod = _module(_convs_and_linear)
    kokoro_tvm_ext.enable_kernels()
    try:
        seen = {}
        t = threading.Thread(target=lambda: seen.setdefault("calls", _kernel_calls(_legalized(mod))))
        t.start()
        t.join()
        assert seen["calls"] == ["conv1d", "conv1d_transpose", "matmul"]
    finally:
        kokoro_tvm_ext.disable_kernels()
    assert _kernel_calls(_legalized(mod)) == []


def _unsupported(bb, x64, x, w, w_nwc, a, w3):
    return relax.Tuple(
        [
            bb.emit(relax.op.nn.conv1d(x64, relax.op.astype(w, "float64"))),  # float64
            bb.emit(relax.op.nn.conv1d(x, w, out_dtype="float16")),  # another output dtype
            bb.emit(relax.op.nn.conv1d(x, w_nwc, data_layout="NWC", kernel_layout="WIO")),  # layouts
            bb.emit(relax.op.matmul(a, w3)),  # batched weight: not a linear layer
        ]
    )


_unsupported.params = [
    ("x64", [1, 3, 9], "float64"),
    ("x", [1, 3, 9], "float32"),
    ("w", [4, 3, 2], "float32"),
    ("w_nwc", [2, 9, 4], "float32"),
    ("a", [2, 9, 3], "float32"),
    ("w3", [2, 3, 4], "float32"),
]


def test_what_the_kernels_do_not_cover_goes_to_tvm():
    mod = _module(_unsupported)
    with kokoro_tvm_ext.kernels_enabled():
        legalized = _legalized(mod)
    assert _kernel_calls(legalized) == []
    assert legalized.script().count("R.call_tir(") >= 4


@pytest.fixture(scope="module")
def compiled_with_kernels():
    with kokoro_tvm_ext.kernels_enabled():
        return tvm.compile(_module(_convs_and_linear), TARGET)


@pytest.mark.parametrize("length", [9, 40])  # 9: the shortest input the dilated conv takes
def test_stock_compile_with_kernels_matches_torch(compiled_with_kernels, length):
    vm = relax.VirtualMachine(compiled_with_kernels, tvm.cpu())
    rng = np.random.default_rng(length)
    x, w, wt, a, lw = (
        rng.standard_normal([length if isinstance(d, tvm.tirx.Var) else d for d in shape]).astype(np.float32)
        for _, shape, _ in _convs_and_linear.params
    )
    got = [o.numpy() for o in vm["main"](*(tvm.runtime.tensor(v) for v in (x, w, wt, a, lw)))]
    t = torch.from_numpy
    want = [
        torch.nn.functional.conv1d(torch.nn.functional.pad(t(x), (3, 1)), t(w), stride=2, dilation=3, groups=2),
        torch.nn.functional.conv_transpose1d(t(x), t(wt), stride=3, padding=2, output_padding=1, groups=2),
        t(a) @ t(lw),
    ]
    for g, r in zip(got, want):
        r = r.numpy()
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(r).max()))


def test_install_errors_name_the_fix():
    code = """
import tvm, tvm.relax, tvm_ffi
from tvm.relax.transform.legalize_ops.common import register_legalize
import kokoro_tvm_ext
install = tvm_ffi.get_global_func("kokoro_tvm_ext.legalize.install")
try:
    install(10)
except ValueError as e:
    print("low:", e)
# Someone else's handler above ours:
tvm.ir.register_op_attr("relax.matmul", "FLegalize", lambda bb, call: call, level=30)
try:
    kokoro_tvm_ext.enable_kernels()
except ValueError as e:
    print("taken:", e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    low, taken = out.stdout.strip().splitlines()
    assert "level 10" in low and "11 or more" in low
    assert "relax.matmul" in taken and "higher level" in taken


def test_handlers_need_installing_first():
    code = """
import tvm, tvm.relax, tvm_ffi
import kokoro_tvm_ext
handler = tvm_ffi.get_global_func("kokoro_tvm_ext.legalize.conv1d")
x = tvm.relax.Var("x", tvm.relax.TensorType([1, 2, 3], "float32"))
w = tvm.relax.Var("w", tvm.relax.TensorType([2, 2, 1], "float32"))
try:
    handler(tvm.relax.BlockBuilder(), tvm.relax.op.nn.conv1d(x, w))
except RuntimeError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "enable_kernels" in out.stdout
