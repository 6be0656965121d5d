"""The audio stage's cost per frame against its frame count: what batching requests' audio stages could save on
this machine. See bench/kokoro_bench/audio_frames.py.

Usage: python bench/audio_frames.py [--threads 2] [--repeat 5] [--frames 40 80 ...] [--precisions fp32 int8]
"""

import sys

from kokoro_bench.audio_frames import main

if __name__ == "__main__":
    sys.exit(main())
