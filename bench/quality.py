"""Reading quality: recognizer character error per language for our fp32, bf16 and int8 and PyTorch's KPipeline
on the same lines, short inputs and long calls; ``--chunk-policy`` adds what the chunking policy is chosen from.

The benchmark itself lives in bench/kokoro_bench/quality.py (its docstring says more).

Usage: python bench/quality.py [--sentences 300] [--languages a e ...] [--precisions fp32 int8] [--chunk-policy]
                              [--resume lines.jsonl]
"""

import sys

from kokoro_bench.quality import main

if __name__ == "__main__":
    sys.exit(main())
