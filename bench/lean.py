"""The lean runtime: cold `kokoro-tvm say` (wall and CPU time, and a per-step breakdown) and the
peak memory of synthesis next to ONNX Runtime int8's, one run. See bench/kokoro_bench/lean.py.

Usage: python bench/lean.py [--threads 2] [--repeat 5] [--skip-memory] [--sentence TEXT]
"""

import sys

from kokoro_bench.lean import main

if __name__ == "__main__":
    sys.exit(main())
