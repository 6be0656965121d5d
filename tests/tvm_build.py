"""Build-and-run helpers shared by the tests (imported as `tvm_build`)."""

from __future__ import annotations

import numpy as np

import kokoro_tvm_ext  # noqa: F401  (registers the plugin before any VM is created)

TARGET = {"kind": "llvm"}


def build_vm(mod):
    """Compile a Relax IRModule for the host CPU and return a VirtualMachine."""
    import tvm
    from tvm import relax

    exe = tvm.compile(mod, target=tvm.target.Target(TARGET))
    return relax.VirtualMachine(exe, tvm.cpu())


def run_vm(vm, *arrays, fn="main"):
    """Run `fn` on numpy inputs; numpy outputs, unwrapped when there is one."""
    import tvm

    out = vm[fn](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in arrays])
    if isinstance(out, tvm.runtime.Tensor):
        return out.numpy()
    outs = [o.numpy() for o in out]
    return outs[0] if len(outs) == 1 else outs


def export_and_build(module, example_args, dynamic_shapes=None, **import_kwargs):
    """torch.export a module, import it with our converters, and build it."""
    import torch

    ep = torch.export.export(module, example_args, dynamic_shapes=dynamic_shapes)
    mod = kokoro_tvm_ext.from_exported_program(ep, **import_kwargs)
    return build_vm(mod), mod
