"""Side-by-side benchmarks (ours vs PyTorch eager vs ONNX Runtime), shared by
``kokoro-tvm bench`` and the scripts in ``bench/``."""
