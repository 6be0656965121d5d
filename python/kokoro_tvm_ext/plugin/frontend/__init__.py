"""ATen → Relax conversion: our converters, handed to TVM's own importer."""

from __future__ import annotations

from kokoro_tvm_ext.plugin.choices import LSTM_IMPLS
from kokoro_tvm_ext.plugin.frontend import (  # noqa: F401  (each module registers its converters)
    clamp,
    convolution,
    matmul,
    repeat_interleave,
    scalar_operands,
    slice_tensor,
    symbolic_scalars,
)
from kokoro_tvm_ext.plugin.frontend.bind_derived_dims import BindDerivedInputDims
from kokoro_tvm_ext.plugin.frontend.lstm import lstm_converters
from kokoro_tvm_ext.plugin.frontend.random import random_converters
from kokoro_tvm_ext.plugin.frontend.registry import CONVERTERS, converter
from kokoro_tvm_ext.plugin.legalize import slice_scatter  # noqa: F401  (symbolic bounds need our FLegalize)


def decomposition_table():
    """torch's default decompositions, minus the ops we convert whole.

    ``aten.lstm.input`` would otherwise be unrolled into ~44 ops per time step.
    """
    import torch

    table = torch.export.default_decompositions()
    table.pop(torch.ops.aten.lstm.input, None)
    return table


def from_exported_program(
    exported_program,
    *,
    custom_convert_map=None,
    lstm_impl: str = "plugin",
    random_seed: int = 0,
    run_ep_decomposition: bool = True,
    **kwargs,
):
    """TVM's ``from_exported_program`` with our converters added.

    - ``lstm_impl``: "plugin" emits the op ``kokoro_tvm_ext.lstm``, which becomes
      the Rust kernel in our pipeline or with ``kernels_enabled()``, else the TIR
      implementation; "tir" emits that directly (PrimFuncs with a serial time
      loop), for builds that run without the plugin.
    - ``random_seed``: ``rand``/``randn`` (and ``*_like``) become seeded,
      deterministic noise (random.py); it cannot match torch's generator, so
      noise that must match belongs in the model's inputs.
    - ``run_ep_decomposition``: decompose with :func:`decomposition_table`,
      which keeps LSTMs whole.
    - Entries in ``custom_convert_map`` override ours. Other keyword arguments
      go to TVM unchanged.
    - Parameters with derived dims only (``2*T``, no bare ``T``) are rewritten
      so VMShapeLower can bind ``T`` (bind_derived_dims.py).
    """
    from tvm.relax.frontend.torch import from_exported_program as tvm_from_exported_program

    if lstm_impl not in LSTM_IMPLS:
        raise ValueError(f"lstm_impl must be one of {LSTM_IMPLS}, got {lstm_impl!r}")
    if run_ep_decomposition:
        exported_program = exported_program.run_decompositions(decomposition_table())
    convert_map = {
        **CONVERTERS,
        **lstm_converters(lstm_impl),
        **random_converters(random_seed),
        **(custom_convert_map or {}),
    }
    mod = tvm_from_exported_program(
        exported_program, custom_convert_map=convert_map, run_ep_decomposition=False, **kwargs
    )
    # Derived input dims (2*T with no bare T) would fail VMShapeLower; a no-op otherwise.
    return BindDerivedInputDims()(mod)


__all__ = ["CONVERTERS", "LSTM_IMPLS", "converter", "decomposition_table", "from_exported_program"]
