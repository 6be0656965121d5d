"""The plugin's CPU compile pipeline: one ordered list of passes, in phases.

Registered in TVM's pipeline registry as ``"kokoro_tvm_ext_cpu"`` when this
package (``kokoro_tvm_ext.plugin.passes``) is imported, so
``tvm.compile(mod, target, relax_pipeline="kokoro_tvm_ext_cpu")`` uses it;
``cpu_pipeline(target, ...)`` builds it with options. Importing
``kokoro_tvm_ext`` alone registers nothing.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.backend import cpu_generic
from tvm.relax.backend.cpu_generic import pipeline as cpu_generic_pipeline

from kokoro_tvm_ext.plugin.passes.cpu_schedule import ScheduleParallelLoops
from kokoro_tvm_ext.plugin.passes.dispatch_adain import DispatchAdaIN
from kokoro_tvm_ext.plugin.passes.dispatch_kernels import DispatchToPluginKernels
from kokoro_tvm_ext.plugin.passes.expand_powers import ExpandSmallPowers
from kokoro_tvm_ext.plugin.passes.fold_bias import FoldBiasIntoKernels
from kokoro_tvm_ext.plugin.passes.lift_weights import LiftWeights
from kokoro_tvm_ext.plugin.passes.pack_bf16 import PackWeightsBF16, check_precision
from kokoro_tvm_ext.plugin.passes.pack_f32 import PackWeightsF32
from kokoro_tvm_ext.plugin.passes.pack_int8 import PackWeightsInt8
from kokoro_tvm_ext.plugin.passes.pack_winograd import PackWeightsWinograd
from kokoro_tvm_ext.plugin.passes.remove_noop_copies import RemoveNoOpCopies

PIPELINE_NAME = "kokoro_tvm_ext_cpu"


def plugin_passes(use_kernels: bool = True, precision: str = "fp32", bf16_tiles: bool = False) -> list:
    """Phases 0-2 of :func:`pass_list`: the plugin's own passes, before TVM legalizes.

    ``bf16_tiles``: the target CPU multiplies bf16 in AMX tiles (:func:`has_bf16_tiles`).
    """
    kernels = use_kernels
    bf16 = use_kernels and check_precision(precision) == "bf16"
    int8 = use_kernels and precision == "int8"
    return [
        # 0. Reshapes / broadcasts / permutes / casts that provably change nothing are dropped.
        RemoveNoOpCopies(),
        # 1. Dispatch, on the ops as the importer wrote them. Before any folding: folding
        #    would turn a weight broadcast over the batch into a batched constant, and the
        #    dispatch looks through the broadcast to the 2-D weight.
        #    conv1d / conv1d_transpose / linear layers / attention matmuls -> Rust kernels;
        *([DispatchToPluginKernels()] if kernels else []),
        #    the bias adds after them -> the kernels' bias;
        *([FoldBiasIntoKernels()] if kernels else []),
        #    instance norm + AdaIN affine + Snake / leaky_relu -> one fused kernel (the
        #    R.tile'd norm weights it passes are folded in phase 2);
        *([DispatchAdaIN()] if kernels else []),
        #    x ** 2, x ** 3 -> multiplies; exp, tanh, erf, softmax -> polynomials LLVM
        #    vectorizes instead of scalar libm calls (relative error vs float64: tanh,
        #    erf < 4e-7; exp < 4e-7 for |x| <= 6, growing ~6e-8 per unit of |x|; exp
        #    overflows from 88.38 instead of 88.72). ALBERT's GELU 30x, softmax 1.6x faster.
        ExpandSmallPowers(),
        relax.transform.FastMathTransform(),
        # 2. Weights are constants: fold the permutes and reshapes around them (and weight norm).
        relax.transform.FoldConstant(),
        #    precision="int8": the convolutions and matmuls -> int8 kernels, weights quantized
        #    now; before Winograd, which the int8 kernels beat on every shape it takes.
        *([PackWeightsInt8()] if int8 else []),
        #    f32 conv1d calls of the shapes Winograd speeds up -> its kernel, weights transformed
        #    now; in both precisions, as it beats the bf16 kernels on the calls it takes, except
        #    where they run on AMX tiles (3-5x the f32 GEMM there, Winograd 1.2-2.2x).
        *([PackWeightsWinograd()] if kernels and not (bf16 and bf16_tiles) else []),
        #    precision="bf16": the other convolutions and matmuls -> bf16 kernels, weights packed.
        *([PackWeightsBF16()] if bf16 else []),
        #    The matmuls left in f32 -> the panel kernel, weights packed now (no per-call packing).
        *([PackWeightsF32()] if kernels else []),
        #    Drop what the dispatches made dead (the broadcasts, the bare products).
        relax.transform.DeadCodeElimination(),
    ]


def has_bf16_tiles(target: tvm.target.Target) -> bool:
    """Whether ``target``'s CPU has AMX-BF16 (Intel Xeon since Sapphire Rapids), as LLVM knows it
    from the CPU's name: the bf16 kernels then multiply in AMX tiles (tvm-ext/src/gemm/amx/)."""
    from tvm.target import codegen

    return bool(codegen.target_has_features("amx-bf16", target))


def pass_list(
    target: tvm.target.Target, use_kernels: bool = True, precision: str = "fp32", weights: dict | None = None
) -> list:
    """The whole pipeline for ``target``, phase by phase (options: see :func:`cpu_pipeline`)."""
    return [
        # 0-2. The plugin's passes.
        *plugin_passes(use_kernels, precision, bf16_tiles=has_bf16_tiles(target)),
        #    Functions imported with their weights as parameters (``num_input``): what the graph
        #    computes from the weights alone (permutes, weight norm, packing) moves to a function
        #    ``<name>_transform_params``, which the runtime runs once per checkpoint.
        relax.transform.LiftTransformParams(),
        # 3. TVM's CPU legalization and fusion (relax.backend.cpu_generic).
        *cpu_generic.library_dispatch_passes(target),
        *cpu_generic.legalize_passes(target),
        # 4. Every PrimFunc still unscheduled runs its outer loops on all cores.
        ScheduleParallelLoops(),
        # 5. TVM's CPU lowering and finalisation.
        *cpu_generic_pipeline.dataflow_lower_passes(target),
        *cpu_generic.finalize_passes(target),
        # 6. With a ``weights`` dict: the large constants become parameters, their values
        #    go to the caller, who stores them beside the library.
        *([LiftWeights(weights)] if weights is not None else []),
    ]


@relax.register_pipeline(PIPELINE_NAME)
def cpu_pipeline(
    target: tvm.target.Target | None = None,
    use_kernels: bool = True,
    precision: str = "fp32",
    weights: dict | None = None,
) -> tvm.transform.Pass:
    """The Relax pipeline ``tvm.compile`` runs for ``target`` (default: the current target,
    which ``tvm.compile`` sets).

    ``use_kernels=False`` keeps convolutions and matmuls in TVM.
    ``precision="bf16"`` runs the kernels' convolutions and matmuls on bf16
    inputs and weights with f32 accumulation (see pack_bf16.py).
    ``precision="int8"`` runs them on int8 weights and u8 inputs with int32
    accumulation where the CPU has AVX512-VNNI, or dotprod or i8mm on aarch64
    (see pack_int8.py).
    ``weights``: a dict that receives each function's lifted weights (see
    lift_weights.py); the functions then take them as trailing parameters.
    """
    check_precision(precision)

    @tvm.transform.module_pass(opt_level=0, name="KokoroCPUPipeline")
    def pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        use = target if target is not None else tvm.target.Target.current()
        if use is None:
            raise ValueError(
                f"{PIPELINE_NAME}: no target given and none is current (pass target=, or run it "
                "from tvm.compile(..., target=...))"
            )
        with use:
            return tvm.transform.Sequential(pass_list(use, use_kernels, precision, weights))(mod)

    return pipeline
