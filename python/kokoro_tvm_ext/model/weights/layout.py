"""KModel's state-dict layout at Kokoro-82M's config, as bundled data, and building an empty KModel.

``data/kmodel-82m-layout.json`` lists what ``kokoro.KModel(config)`` (kokoro 0.9.4) has, so that
the offline rebuild and the checkpoint checks need no torch:

* ``state_dict``: every parameter's flat name and shape (all float32);
* ``instance_norms``: the ``InstanceNorm1d`` modules (their affine parameters are absent from the
  int8 ONNX export, see :mod:`.rebuild`);
* ``computed_buffers``: buffers KModel computes itself and never loads (ALBERT's ``position_ids``,
  the STFT kernels of ``disable_complex=True``); a checkpoint may carry them, they are dropped;
* ``hyperparameters``: the config (without its vocabulary) the table holds for.

The file is generated once, with torch and kokoro installed::

    python -m kokoro_tvm_ext.speech.assets.kmodel_layout

``tests/assets/test_assets_checkpoint.py`` checks it still equals what kokoro builds.
"""

from __future__ import annotations

import io
import json
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kokoro_tvm_ext.errors import CorruptAssetError

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


# ---------------------------------------------------------------------------------------------
# With torch and kokoro: building KModel, and generating the table from it


def empty_checkpoint() -> io.BytesIO:
    """A serialized empty dict: passed as ``model=`` it makes KModel load nothing (and
    never reach for the network), so weights can be loaded afterwards under our control."""
    import torch

    buf = io.BytesIO()
    torch.save({}, buf)
    buf.seek(0)
    return buf


def build_kmodel(config: dict, *, device=None, disable_complex: bool = False):
    """``kokoro.KModel`` from a config dict with default-initialized weights, no network."""
    import torch
    from kokoro import KModel

    with warnings.catch_warnings():
        # kokoro's own LSTM(dropout) and weight_norm deprecation warnings: not ours to fix.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        with torch.device(device) if device is not None else nullcontext():
            return KModel(
                repo_id="hexgrad/Kokoro-82M",
                config=config,
                model=empty_checkpoint(),
                disable_complex=disable_complex,
            )


def describe_kmodel(config: dict) -> dict:
    """The layout table's content, read off KModel built on the meta device (no memory, no init)."""
    import torch

    model = build_kmodel(config, device="meta")
    state = model.state_dict()
    not_float = [k for k, v in state.items() if v.dtype != torch.float32]
    if not_float:  # the table stores no dtypes: it relies on this
        raise CorruptAssetError(f"KModel has parameters that are not float32: {', '.join(not_float)}")
    # disable_complex=True adds the STFT's kernels as buffers; they are computed from numpy at
    # construction, so that model cannot be built on the meta device.
    real_stft = build_kmodel(config, device="cpu", disable_complex=True)
    buffers = {name for m in (model, real_stft) for name, _ in m.named_buffers()}
    return {
        "hyperparameters": hyperparameters(config),
        "state_dict": {k: list(v.shape) for k, v in state.items()},
        "instance_norms": sorted(n for n, m in model.named_modules() if isinstance(m, torch.nn.InstanceNorm1d)),
        "computed_buffers": sorted(buffers - set(state)),
    }


def write_layout(config: dict, path: Path = LAYOUT_FILE) -> None:
    """Write the table, one parameter per line (readable diffs)."""
    table = describe_kmodel(config)
    lines = ["{"]
    for key in ("hyperparameters", "instance_norms", "computed_buffers"):
        lines.append(f"  {json.dumps(key)}: {json.dumps(table[key], ensure_ascii=False)},")
    lines.append('  "state_dict": {')
    items = list(table["state_dict"].items())
    lines += [
        f"    {json.dumps(k)}: {json.dumps(v)}{',' if i < len(items) - 1 else ''}" for i, (k, v) in enumerate(items)
    ]
    lines += ["  }", "}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    from kokoro_tvm_ext.model.config import load_config

    write_layout(load_config())
    print(f"wrote {LAYOUT_FILE}")
