"""The plugin's CPU compile pipeline: one ordered list of passes.

0. RemoveNoOpCopies: reshapes / broadcasts / permutes that provably change
   nothing are dropped (remove_noop_copies.py).
1. DispatchToPluginKernels: conv1d / conv1d_transpose / linear layers /
   attention matmuls go to the Rust kernels (dispatch_kernels.py);
   FoldBiasIntoKernels: the bias adds after them become the kernels' bias
   (fold_bias.py); DispatchAdaIN: instance norm + AdaIN affine + Snake /
   leaky_relu chains go to one fused kernel (dispatch_adain.py).
   ExpandSmallPowers: ``x ** 2`` / ``x ** 3`` become multiplies
   (expand_powers.py); TVM's FastMathTransform: exp, tanh, erf and softmax
   use polynomial approximations that LLVM vectorizes instead of scalar libm
   calls (relative error vs float64: tanh, erf < 4e-7; exp < 4e-7 for
   |x| <= 6, growing ~6e-8 per unit of |x|; exp overflows from 88.38 instead
   of 88.72). Together they make ALBERT's GELU 30x and its softmax 1.6x
   faster.
2. FoldConstant + DeadCodeElimination: weights are constants; fold the
   permutes and reshapes around them, drop the broadcasts the dispatch made dead.
   Then PackWeightsWinograd (pack_winograd.py): the f32 conv1d calls of the
   shapes it speeds up go to the Winograd kernel, weights transformed now.
   With precision="bf16", PackWeightsBF16 (pack_bf16.py) follows: the other
   convolutions and matmuls go to the bf16 kernels, weights packed to bf16.
3. TVM's CPU legalization and fusion (relax.backend.cpu_generic).
4. ParallelOuterLoops: every remaining PrimFunc runs on all cores (cpu_schedule.py).
5. TVM's CPU lowering and finalisation.
6. With a ``weights`` dict: LiftWeights (lift_weights.py) makes the large
   constants parameters and hands their values to the caller, who stores them
   beside the library.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.backend import cpu_generic
from tvm.relax.backend.cpu_generic import pipeline as cpu_generic_pipeline

from .cpu_schedule import schedule_pass
from .dispatch_adain import DispatchAdaIN
from .dispatch_kernels import DispatchToPluginKernels
from .expand_powers import ExpandSmallPowers
from .fold_bias import FoldBiasIntoKernels
from .lift_weights import lift_weights
from .pack_bf16 import PackWeightsBF16, check_precision
from .pack_winograd import PackWeightsWinograd
from .remove_noop_copies import RemoveNoOpCopies


def plugin_passes(use_kernels: bool = True, precision: str = "fp32") -> list:
    # Dispatch first: folding would turn a weight broadcast over the batch into a
    # batched constant; the dispatch looks through the broadcast to the 2-D weight.
    passes = [RemoveNoOpCopies] + ([DispatchToPluginKernels, FoldBiasIntoKernels] if use_kernels else [])
    if use_kernels:
        passes.append(DispatchAdaIN)  # the R.tile'd norm weights it passes are folded next
    # After the dispatches, which match the ops as the importer wrote them.
    passes += [ExpandSmallPowers, relax.transform.FastMathTransform(), relax.transform.FoldConstant()]
    # After folding: the weights are constants now. Winograd first, in both
    # precisions: it beats the bf16 kernels on the calls it takes (see pack_winograd.py).
    if use_kernels:
        passes.append(PackWeightsWinograd)
    if use_kernels and check_precision(precision) == "bf16":
        passes.append(PackWeightsBF16)
    return passes + [relax.transform.DeadCodeElimination()]


def pass_list(target: tvm.target.Target, use_kernels: bool = True, precision: str = "fp32",
              weights: dict | None = None) -> list:
    lifted = [] if weights is None else [lift_weights(weights)]
    return (
        plugin_passes(use_kernels, precision)
        + cpu_generic.library_dispatch_passes(target)
        + cpu_generic.legalize_passes(target)
        + [schedule_pass()]
        + cpu_generic_pipeline.dataflow_lower_passes(target)
        + cpu_generic.finalize_passes(target)
        + lifted
    )


def cpu_pipeline(target: tvm.target.Target, use_kernels: bool = True, precision: str = "fp32",
                 weights: dict | None = None):
    """The Relax pipeline ``tvm.compile`` runs for ``target``.

    ``use_kernels=False`` keeps convolutions and matmuls in TVM.
    ``precision="bf16"`` runs the kernels' convolutions and matmuls on bf16
    inputs and weights with f32 accumulation (see pack_bf16.py).
    ``weights``: a dict that receives each function's lifted weights (see
    lift_weights.py); the functions then take them as trailing parameters.
    """
    check_precision(precision)

    @tvm.transform.module_pass(opt_level=0, name="KokoroCPUPipeline")
    def pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with target:
            return tvm.transform.Sequential(pass_list(target, use_kernels, precision, weights))(mod)

    return pipeline
