"""The compiled artifact on disk: ``kokoro.so`` plus ``meta.json``."""
from __future__ import annotations

import json
import os
from pathlib import Path

LIBRARY = "kokoro.so"
META = "meta.json"
# Bumped whenever the kernels' packed weights change layout, since an artifact
# carries them as constants: 2 = Winograd F(4,7) (was F(2,7)), new interpolation points.
FORMAT_VERSION = 2


def write_meta(out_dir: Path, meta: dict) -> None:
    tmp = out_dir / (META + ".tmp")
    tmp.write_text(json.dumps({"format_version": FORMAT_VERSION, **meta}, indent=2, sort_keys=True))
    os.replace(tmp, out_dir / META)


def read_meta(out_dir: Path) -> dict:
    path = Path(out_dir) / META
    if not path.is_file() or not (Path(out_dir) / LIBRARY).is_file():
        raise FileNotFoundError(
            f"no compiled Kokoro artifact in {out_dir} (want {META} and {LIBRARY}); "
            "create one with `kokoro-tvm compile` or kokoro_tvm_ext.compile_kokoro(model, out_dir)"
        )
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is corrupt ({err}); delete {out_dir} and compile again") from err
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has artifact format {meta.get('format_version')}, this kokoro-tvm-ext reads "
            f"{FORMAT_VERSION}; compile again"
        )
    return meta
