"""`kokoro-tvm serve` under load (1, 4, 16 openai clients), ours vs PyTorch eager behind the same server.

The same as ``kokoro-tvm bench --serve``; the benchmark itself lives in
kokoro_tvm_ext/benchmark/serve_load.py so the installed command can run it.

Usage: python bench/serve.py [--threads 2] [--backends tvm torch] [--clients 1 4 16] [--requests 48]
"""

import sys

from kokoro_tvm_ext.benchmark.serve_load import main

if __name__ == "__main__":
    sys.exit(main())
