"""The compiler's choices an artifact records: its precision and its LSTM implementation. Imports nothing, so the
runtime (``model/runtime/artifact.py``) checks an artifact's metadata against them without loading the compiler."""

PRECISIONS = ("fp32", "bf16", "int8")  # passes/pack_bf16.py, pack_int8.py: how the weights are packed
LSTM_IMPLS = ("plugin", "tir")  # frontend/lstm.py: the Rust LSTM kernel, or a TIR loop that runs without it
