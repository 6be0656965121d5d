"""Side-by-side benchmarks (ours vs PyTorch, torch.compile, OpenVINO, ONNX Runtime), run by the scripts in
``bench/`` (``python bench/e2e.py``, ...). Outside the installed package: bench/ is put on ``sys.path`` by
running a script from it, and by pytest (``pythonpath`` in pyproject.toml). What the tests use too (a loopback
Ray cluster, the recognizer, audio distances, a server's health) is the harness (harness/kokoro_harness), put on
``sys.path`` here, so every script and worker process that imports the bench finds it."""

import sys
from pathlib import Path

_HARNESS = str(Path(__file__).resolve().parents[2] / "harness")
if _HARNESS not in sys.path:
    sys.path.append(_HARNESS)
