"""The plugin layer: a generic TVM extension, usable on any model through stock ``tvm.compile``.

- :mod:`.kernels`: the Rust kernels' interfaces (read from the library) and how to call them;
- :mod:`.frontend`: ATen converters handed to TVM's importer (``custom_convert_map=``);
- :mod:`.passes`: Relax passes, one registered pipeline (``kokoro_tvm_ext_cpu``);
- :mod:`.legalize`: legalizations, and the switch that puts our kernels into any compile;
- :mod:`.torch_lstm`: an opaque LSTM custom op so ``torch.export`` keeps sequence lengths symbolic;
- :mod:`.native_log`: quiets TVM's known-harmless C++ warnings during a compile;
- :mod:`.choices`: the precisions and LSTM implementations a compile takes (light: the runtime reads them).

Imports TVM (and torch, inside the converters that need it); never the model, speech or apps layers.
"""
