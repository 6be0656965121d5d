"""The errors a user can cause, by who has to act (see :mod:`kokoro_tvm_ext.support.errors`): the public name
users import them by. The package's own modules import ``kokoro_tvm_ext.support.errors``."""

from kokoro_tvm_ext.support.errors import (
    ArtifactCorruptError,
    ArtifactError,
    ArtifactMissingError,
    AssetError,
    CheckpointMismatchError,
    CorruptAssetError,
    InputWarning,
    InvalidInputError,
    InvalidVoiceError,
    KokoroError,
    KokoroWarning,
    MissingAssetError,
    RequestCancelled,
    UnknownVoiceError,
    UnsupportedCPUError,
    UnwritablePathError,
)

__all__ = [
    "ArtifactCorruptError",
    "ArtifactError",
    "ArtifactMissingError",
    "AssetError",
    "CheckpointMismatchError",
    "CorruptAssetError",
    "InputWarning",
    "InvalidInputError",
    "InvalidVoiceError",
    "KokoroError",
    "KokoroWarning",
    "MissingAssetError",
    "RequestCancelled",
    "UnknownVoiceError",
    "UnsupportedCPUError",
    "UnwritablePathError",
]
