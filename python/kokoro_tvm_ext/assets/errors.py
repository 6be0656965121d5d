"""The errors the asset layer raises. Every message says what is wrong and what to do.

The CLI catches :class:`AssetError` and prints its message without a traceback.
Input mistakes (empty text, an unknown voice, bad blend syntax) are plain
``ValueError`` instead, because they are the caller's to fix, not the install's.
"""
from __future__ import annotations


class AssetError(RuntimeError):
    """Weights, config or voice data could not be found, verified or loaded."""


class MissingAssetError(AssetError):
    """A file or package the asset layer needs is not there."""


class CorruptAssetError(AssetError):
    """A file exists but its content is wrong (checksum mismatch, unloadable, wrong keys)."""
