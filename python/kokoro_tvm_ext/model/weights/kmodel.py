"""``kokoro.KModel`` from weights (torch): build it without the network, load a checkpoint strictly.

:func:`load_kmodel` loads every submodule strictly: an unexpected key, or a missing parameter, is
an error. Only buffers KModel computes itself (the STFT kernels that ``disable_complex=True`` adds)
may be absent from the file. :func:`build_kmodel` also gives the seeded random model the tests
compile. Run as a module, it regenerates the bundled layout table (:mod:`.layout`)::

    python -m kokoro_tvm_ext.model.weights.kmodel

torch and kokoro are imported inside the functions: the rest of the weights package needs neither.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from contextlib import nullcontext
from pathlib import Path

from kokoro_tvm_ext.model.weights.files import normalize_state_dict, read_checkpoint
from kokoro_tvm_ext.model.weights.layout import LAYOUT_FILE, SUBMODULES, hyperparameters
from kokoro_tvm_ext.model.weights.sources import REBUILD, Weights, find_weights
from kokoro_tvm_ext.support.cache import Progress
from kokoro_tvm_ext.support.errors import CorruptAssetError


def empty_checkpoint() -> io.BytesIO:
    """A serialized empty dict: passed as ``model=`` it makes KModel load nothing (and
    never reach for the network), so weights can be loaded afterwards under our control."""
    import torch

    buf = io.BytesIO()
    torch.save({}, buf)
    buf.seek(0)
    return buf


def build_kmodel(config: dict, *, seed: int | None = None, device=None, disable_complex: bool = False):
    """``kokoro.KModel`` from a config dict with its initial weights, no network; in eval mode.
    ``seed``: seed torch first, for the same random weights on every call (the tests' model)."""
    import torch
    from kokoro import KModel

    if seed is not None:
        torch.manual_seed(seed)
    with warnings.catch_warnings():
        # kokoro's own LSTM(dropout) and weight_norm deprecation warnings: not ours to fix.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        with torch.device(device) if device is not None else nullcontext():
            model = KModel(
                repo_id="hexgrad/Kokoro-82M",
                config=config,
                model=empty_checkpoint(),
                disable_complex=disable_complex,
            )
    return model.eval()


def load_state_dict_strict(model, state: dict[str, dict], origin: str = "weights") -> None:
    """Load a grouped state_dict into a KModel; every parameter must be covered, nothing extra."""
    missing_groups = [g for g in SUBMODULES if g not in state]
    if missing_groups:
        raise CorruptAssetError(f"{origin} lack the submodule(s) {', '.join(missing_groups)}")
    for head in SUBMODULES:
        module = getattr(model, head)
        try:
            result = module.load_state_dict(state[head], strict=False)
        except RuntimeError as err:  # shape mismatches
            raise CorruptAssetError(f"{origin} do not fit KModel.{head}: {str(err).splitlines()[-1].strip()}") from err
        buffers = {name for name, _ in module.named_buffers()}
        missing = [k for k in result.missing_keys if k not in buffers]
        if missing or result.unexpected_keys:
            parts = []
            if missing:
                parts.append(f"missing {len(missing)} ({', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''})")
            if result.unexpected_keys:
                extra = result.unexpected_keys
                parts.append(f"unexpected {len(extra)} ({', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''})")
            raise CorruptAssetError(f"{origin} do not match KModel.{head}: {'; '.join(parts)}")


def load_kmodel(weights: str | os.PathLike | Weights | None = None, *, disable_complex: bool = False):
    """A ``kokoro.KModel`` in eval mode on the CPU, with strictly loaded float weights.

    ``weights``: a :class:`Weights`, a checkpoint path, or ``None`` (:func:`find_weights`' default).
    If the cached rebuild turns out unloadable, it is deleted and rebuilt once.
    """
    import torch

    weights = weights if isinstance(weights, Weights) else find_weights(weights)
    try:
        flat = read_checkpoint(weights.ensure_file())
    except CorruptAssetError as err:
        if weights.source != REBUILD:
            raise
        Progress().say(f"{err}; deleting it and rebuilding")
        weights.path.unlink(missing_ok=True)
        flat = read_checkpoint(weights.ensure_file())
    state = {
        head: {k: torch.from_numpy(v) for k, v in sub.items()}
        for head, sub in normalize_state_dict(flat, str(weights.path)).items()
    }
    model = build_kmodel(weights.config, disable_complex=disable_complex)
    load_state_dict_strict(model, state, f"weights {weights.path}")
    return model


# ---------------------------------------------------------------------------------------------
# Generating the bundled layout table


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
