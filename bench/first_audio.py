"""Seconds to first audio after ``pip install``: ``kokoro-tvm say`` in a fresh ``[speak]`` virtualenv from an empty
cache, a later cold run, and ONNX Runtime int8's session start beside them. See bench/kokoro_bench/first_audio.py.

Usage: python bench/first_audio.py [--wheels DIR] [--runs 3] [--voices-sdist kokoro-0.9.4.tar.gz]
"""

import sys

from kokoro_bench.first_audio import main

if __name__ == "__main__":
    sys.exit(main())
