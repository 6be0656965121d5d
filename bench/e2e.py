"""End-to-end Kokoro-82M: ours vs PyTorch eager vs ONNX Runtime, one table from one run.

The same as ``kokoro-tvm bench``; the benchmark itself lives in
kokoro_tvm_ext/benchmark/e2e.py so the installed command can run it.

Usage: python bench/e2e.py [--threads 2] [--repeat 5] [--systems tvm torch ...] [--json rows.json]
"""

import sys

from kokoro_tvm_ext.benchmark.e2e import main

if __name__ == "__main__":
    sys.exit(main())
