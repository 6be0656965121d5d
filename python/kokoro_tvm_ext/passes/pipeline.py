"""The plugin's CPU compile pipeline: one ordered list of passes.

1. FoldConstant: weights are constants; fold what the importer left around
   them (permutes of weights, reshapes of biases).
2. DispatchToPluginKernels: conv1d / conv1d_transpose / linear layers go to
   the Rust kernels (dispatch_kernels.py).
3. FoldConstant again: weight reshapes the dispatch added.
4. TVM's own CPU pipeline: legalize, fuse, lower, plan memory.
"""
from __future__ import annotations

import tvm
from tvm import relax

from .dispatch_kernels import DispatchToPluginKernels


def plugin_passes(use_kernels: bool = True) -> list:
    passes = [relax.transform.FoldConstant()]
    if use_kernels:
        passes += [DispatchToPluginKernels, relax.transform.FoldConstant()]
    return passes


def cpu_pipeline(target: tvm.target.Target, use_kernels: bool = True):
    """The Relax pipeline ``tvm.compile`` runs for ``target``.

    ``use_kernels=False`` keeps every op in TVM (an artifact that needs the
    plugin library only if its LSTMs do).
    """
    stock = relax.get_default_pipeline(target)

    @tvm.transform.module_pass(opt_level=0, name="KokoroCPUPipeline")
    def pipeline(mod: tvm.IRModule, ctx) -> tvm.IRModule:
        with target:
            mod = tvm.transform.Sequential(plugin_passes(use_kernels))(mod)
        return stock(mod)

    return pipeline
