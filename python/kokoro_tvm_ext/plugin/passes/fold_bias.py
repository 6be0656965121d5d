"""Fold a bias add into the plugin kernel call that produces its input.

Every torch ``Conv1d`` / ``ConvTranspose1d`` / ``Linear`` with a bias imports
as the bare product followed by ``R.add(y, R.reshape(b, [1, C, 1]))`` (or
``R.add(b, y)`` for linear layers). Left alone, TVM runs that add as one more
pass over the product's output, the vocoder's largest tensors. The kernels
already take a bias (they prefill the output with it), so

    y = call_dps_packed("kokoro_tvm_ext.conv1d", (..., has_bias=0, x, w))
    z = R.add(y, bias)            # y used nowhere else

becomes ``z = call_dps_packed("kokoro_tvm_ext.conv1d", (..., has_bias=1, x, w,
reshape(bias, [C])))``. A bias is anything of shape ``[1, C, 1]`` / ``[C, 1]``
for the convolutions (``[B, C, L]`` outputs) and ``[N]`` / ``[1, ..., 1, N]``
for matmul (``[..., N]`` outputs), that does not make the add broadcast the
product to a larger shape. Runs right after DispatchToPluginKernels; the
product left dead is removed by DeadCodeElimination.
"""

from __future__ import annotations

from collections import Counter

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator
from tvm.sym import Analyzer

from kokoro_tvm_ext.plugin.kernels import KernelCall
from kokoro_tvm_ext.plugin.kernels import call as kernel_call
from kokoro_tvm_ext.plugin.passes._relax_utils import UseCounter, is_f32, map_functions, same_shape, shape_of

ADD = tvm.ir.Op.get("relax.add")

# The kernels that take a bias -> their output's channel axis, counted from the end.
CHANNEL_AXIS = {"conv1d": 2, "conv1d_transpose": 2, "matmul": 1}


def _kernel_without_bias(expr) -> KernelCall | None:
    """``expr`` read as a plugin kernel call that takes a bias but has none, else None."""
    kc = KernelCall.read(expr)
    return kc if kc is not None and kc.name in CHANNEL_AXIS and kc["has_bias"] == 0 else None


def _bias_length(bias, out_shape, axis_from_end: int, analyzer: Analyzer):
    """The channel count if ``bias`` broadcasts onto ``out_shape`` along its channel axis only."""
    shape = shape_of(bias)
    if shape is None or out_shape is None or not 1 <= len(shape) <= len(out_shape) or not is_f32(bias):
        return None
    channels = out_shape[len(out_shape) - axis_from_end]
    padded = [1] * (len(out_shape) - len(shape)) + shape
    for i, d in enumerate(padded):
        want = channels if i == len(out_shape) - axis_from_end else 1
        if not analyzer.can_prove_equal(d, want):
            return None
    return channels


@mutator
class _BiasFolder(PyExprMutator):
    def __init__(self, mod, uses: Counter):
        super().__init__(mod)
        self.uses = uses
        self.analyzer = Analyzer()
        self.block_vars: set = set()  # bound so far in the current block

    def visit_binding_block_(self, block):
        self.block_vars = set()
        return super().visit_binding_block_(block)

    def visit_dataflow_block_(self, block):
        self.block_vars = set()
        return super().visit_dataflow_block_(block)

    def visit_var_binding_(self, binding):
        super().visit_var_binding_(binding)
        self.block_vars.add(binding.var)

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if call.op != ADD or len(call.args) != 2:
            return call
        out_shape = shape_of(call)
        for product, bias in (call.args, call.args[::-1]):
            # The kernel call moves to the add: only within one block, where its
            # inputs are still in scope.
            if product not in self.block_vars or self.uses.get(product, 0) != 1:
                continue
            kernel = _kernel_without_bias(self.lookup_binding(product))
            if kernel is None:
                continue
            product_shape = shape_of(product)
            if not same_shape(out_shape, product_shape, self.analyzer):
                continue
            channels = _bias_length(bias, product_shape, CHANNEL_AXIS[kernel.name], self.analyzer)
            if channels is None:
                continue
            args = {**kernel.args, "has_bias": 1, "bias": relax.op.reshape(bias, [channels])}
            return kernel_call(kernel.name, call.ty, **args)
        return call


@tvm.transform.module_pass(opt_level=0, name="FoldBiasIntoKernels")
class FoldBiasIntoKernels:
    """A per-channel bias add after a plugin kernel call becomes the call's bias (see module doc)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return map_functions(mod, lambda _gvar, func: _BiasFolder(mod, UseCounter.of(func).counts).visit_expr(func))
