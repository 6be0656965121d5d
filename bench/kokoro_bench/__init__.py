"""Side-by-side benchmarks (ours vs PyTorch, torch.compile, OpenVINO, ONNX Runtime), run by the scripts in
``bench/`` (``python bench/e2e.py``, ...). Outside the installed package: bench/ is put on ``sys.path`` by
running a script from it, and by pytest (``pythonpath`` in pyproject.toml)."""
