"""KModel's state-dict layout at Kokoro-82M's config, as bundled data: what the checks read without torch.

``data/kmodel-82m-layout.json`` lists what ``kokoro.KModel(config)`` (kokoro 0.9.4) has, so that
the offline rebuild and the checkpoint checks need no torch:

* ``state_dict``: every parameter's flat name and shape (all float32);
* ``instance_norms``: the ``InstanceNorm1d`` modules (their affine parameters are absent from the
  int8 ONNX export, see :mod:`.rebuild`);
* ``computed_buffers``: buffers KModel computes itself and never loads (ALBERT's ``position_ids``,
  the STFT kernels of ``disable_complex=True``); a checkpoint may carry them, they are dropped;
* ``hyperparameters``: the config (without its vocabulary) the table holds for.

The file is generated once, with torch and kokoro installed (:mod:`.kmodel`)::

    python -m kokoro_tvm_ext.model.weights.kmodel

``tests/assets/test_assets_checkpoint.py`` checks it still equals what kokoro builds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kokoro_tvm_ext.support.errors import CorruptAssetError

SUBMODULES = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
LAYOUT_FILE = Path(__file__).parent / "data" / "kmodel-82m-layout.json"


@dataclass(frozen=True)
class KModelLayout:
    hyperparameters: dict
    shapes: dict[str, tuple[int, ...]]
    instance_norms: frozenset[str]
    computed_buffers: frozenset[str]


def hyperparameters(config: dict) -> dict:
    """What of a config decides KModel's shapes: everything but the vocabulary."""
    return {k: v for k, v in config.items() if k != "vocab"}


@lru_cache(maxsize=1)
def bundled_layout() -> KModelLayout:
    try:
        raw = json.loads(LAYOUT_FILE.read_text(encoding="utf-8"))
        return KModelLayout(
            raw["hyperparameters"],
            {k: tuple(v) for k, v in raw["state_dict"].items()},
            frozenset(raw["instance_norms"]),
            frozenset(raw["computed_buffers"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CorruptAssetError(f"the bundled KModel layout {LAYOUT_FILE} is unreadable ({err}); reinstall") from err


def layout_for(config: dict) -> KModelLayout:
    """The bundled layout, if ``config`` is Kokoro-82M's (up to its vocabulary)."""
    layout = bundled_layout()
    wanted = hyperparameters(config)
    if wanted != layout.hyperparameters:
        differ = sorted(
            k for k in set(wanted) | set(layout.hyperparameters) if wanted.get(k) != layout.hyperparameters.get(k)
        )
        raise CorruptAssetError(
            f"the config differs from Kokoro-82M's in {', '.join(differ)}: the bundled KModel layout does not apply"
        )
    return layout
