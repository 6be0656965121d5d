"""A prebuilt portable library against a native compile: the default weights bound to both, interleaved runs
on the two bench texts (RTF, median). See bench/kokoro_bench/prebuilt.py.

Usage: python bench/prebuilt.py --native DIR --portable DIR [--runs 5]
"""

import sys

from kokoro_bench.prebuilt import main

if __name__ == "__main__":
    sys.exit(main())
