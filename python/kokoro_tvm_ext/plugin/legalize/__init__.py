"""Legalizations (Relax op -> TIR or a kernel call), all of the plugin's in one place.

- :mod:`.slice_scatter`: registers a ``FLegalize`` that replaces stock TVM's where it fails (on import;
  the frontend imports it, because its imported programs rely on it);
- :mod:`.switch`: turns on the Rust library's handlers (our kernels in any ``tvm.compile``);
- :mod:`.lstm_tir`: the LSTM op's own legalization, a TIR loop, for builds without the kernels.

Each registers through TVM's public ``tvm.ir.register_op_attr`` at a higher priority level than
TVM's own; nothing in TVM is patched. Importing this package registers nothing.
"""
