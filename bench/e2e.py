"""End-to-end Kokoro-82M: ours vs PyTorch eager vs ONNX Runtime, one table from one run.

The benchmark itself lives in bench/kokoro_bench/e2e.py (its docstring says more).

Usage: python bench/e2e.py [--threads 2] [--repeat 5] [--systems tvm torch ...] [--json rows.json]
"""

import sys

from kokoro_bench.e2e import main

if __name__ == "__main__":
    sys.exit(main())
