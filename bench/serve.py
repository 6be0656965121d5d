"""`kokoro-tvm serve` under load (1, 4, 16 openai clients), ours vs PyTorch eager behind the same server.

The benchmark itself lives in bench/kokoro_bench/serve_load.py.

Usage: python bench/serve.py [--threads 2] [--backends tvm torch] [--clients 1 4 16] [--requests 48]
"""

import sys

from kokoro_bench.serve_load import main

if __name__ == "__main__":
    sys.exit(main())
