"""Kokoro-82M's model config (hyperparameters and the phoneme vocabulary).

``data/config.json`` is hexgrad/Kokoro-82M's ``config.json`` as redistributed in the
``kokoro-onnx`` wheel (see data/README.md). It is data, so it ships with this package:
the offline path then needs neither HuggingFace nor kokoro-onnx. A ``config.json`` from
the HuggingFace cache, or one next to user-supplied weights, takes precedence.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from kokoro_tvm_ext.support.errors import CorruptAssetError, MissingAssetError

REQUIRED_KEYS = (
    "vocab",
    "n_token",
    "hidden_dim",
    "style_dim",
    "n_layer",
    "max_dur",
    "dropout",
    "text_encoder_kernel_size",
    "n_mels",
    "plbert",
    "istftnet",
)


def bundled_config_path() -> Path:
    return Path(str(resources.files(__package__) / "data" / "config.json"))


def load_config(path: str | Path | None = None) -> dict:
    """Read and sanity-check a Kokoro config; ``None`` means the bundled one."""
    path = Path(path) if path is not None else bundled_config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        raise MissingAssetError(f"Kokoro config not found: {path}") from err
    except OSError as err:
        raise MissingAssetError(f"cannot read the Kokoro config {path}: {err.strerror or err}") from err
    try:
        config = json.loads(text)
    except json.JSONDecodeError as err:
        raise CorruptAssetError(f"the Kokoro config {path} is not valid JSON ({err})") from err
    if not isinstance(config, dict):
        raise CorruptAssetError(f"the Kokoro config {path} is not a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in config]
    if missing:
        raise CorruptAssetError(f"the Kokoro config {path} lacks {', '.join(missing)}")
    vocab = config["vocab"]
    if (
        not isinstance(vocab, dict)
        or not vocab
        or not all(
            isinstance(k, str) and len(k) == 1 and isinstance(v, int) and 0 < v < config["n_token"]
            for k, v in vocab.items()
        )
    ):
        raise CorruptAssetError(
            f"the Kokoro config {path} has a malformed vocab (want single characters -> ids in 1..n_token-1)"
        )
    return config
