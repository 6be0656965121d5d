"""Per class of operation: time share, FLOPs or bytes, and the fraction of this CPU's measured peaks, for the
fp32, bf16 and int8 artifacts on the same text.

The benchmark itself lives in bench/kokoro_bench/roofline.py (its docstring says more).

Usage: python bench/roofline.py [--threads 2] [--repeat 5] [--text short|long] [--artifact int8=DIR ...]
"""

import sys

from kokoro_bench.roofline import main

if __name__ == "__main__":
    sys.exit(main())
