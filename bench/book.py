"""`kokoro-tvm book` throughput in one process and on a two-node local Ray cluster, plus the projection
for N machines; prints a table (median per-unit cost, CPU model, threads).

The benchmark itself lives in bench/kokoro_bench/book.py.

Usage: python bench/book.py [--artifact DIR] [--chapters N] [--threads 2] [--unit-chars 1500] [--skip-ray]
"""

import sys

from kokoro_bench.book import main

if __name__ == "__main__":
    sys.exit(main())
