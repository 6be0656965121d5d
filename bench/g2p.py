"""Planning (G2P) time per 1,000 characters, every language, normal and hostile text, two lengths.
See bench/kokoro_bench/g2p.py.

Usage: python bench/g2p.py [--lengths 1000,4000] [--langs abefhijpz] [--repeat 3]
"""

import sys

from kokoro_bench.g2p import main

if __name__ == "__main__":
    sys.exit(main())
