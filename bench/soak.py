"""Soak: 1,000 syntheses of random lengths, voices and speeds; memory and speed over time.

The benchmark itself lives in bench/kokoro_bench/soak.py (see its docstring).

Usage: python bench/soak.py [--calls 1000] [--threads 2] [--systems tvm tvm-pooled torch] [--json rows.json]
"""

import sys

from kokoro_bench.soak import main

if __name__ == "__main__":
    sys.exit(main())
