"""The errors a user (or a broken install) can cause, one hierarchy for the library, the CLI and the server.

Every class says who has to act through two class attributes: ``exit_code`` for
``kokoro-tvm`` (2: fix the input, 3: fix the install, assets or artifact, 1: a path
or the system) and ``http_status`` for the server (4xx: the client's request, 5xx:
this server). The CLI catches :class:`KokoroError` in one place (``cli.main``) and the
server maps it in one place (``serve/errors.py``); anything else is a bug and keeps its
traceback. Each class also derives from the builtin a caller would expect
(``InvalidInputError`` is a ``ValueError``, ``ArtifactMissingError`` a
``FileNotFoundError``), so ``except ValueError`` keeps working.
"""

from __future__ import annotations


class KokoroWarning(UserWarning):
    """Base of the warnings a user should read (their text, markup or language; a missing optional part), which the
    CLI shows as one line each."""


class InputWarning(KokoroWarning):
    """About one text that is still spoken (its language, characters, markup): the servers leave these to their
    clients (one per request is not the operator's to act on)."""


class KokoroError(Exception):
    """Base of every error this package raises on purpose; the message says what to do."""

    exit_code = 1
    http_status = 500
    # Set by the server for errors about one request field (``voice``, ``input``, ...).
    param: str | None = None


class InvalidInputError(KokoroError, ValueError):
    """The caller's input is wrong: empty or unpronounceable text, an unknown language, a bad
    token id or style, an out-of-range option."""

    exit_code = 2
    http_status = 400


class InvalidVoiceError(InvalidInputError):
    """A voice spec that is not a name, a blend or a pack file (bad blend syntax or weights)."""


class UnknownVoiceError(InvalidVoiceError):
    """A well-formed voice name that no installed voice has; the message lists close matches."""


class AssetError(KokoroError, RuntimeError):
    """Weights, config, voice data or an optional package could not be found, verified or loaded."""

    exit_code = 3
    http_status = 503


class MissingAssetError(AssetError):
    """A file or package the asset layer needs is not there."""


class CorruptAssetError(AssetError):
    """A file exists but its content is wrong (checksum mismatch, unloadable, wrong keys)."""


class CheckpointMismatchError(CorruptAssetError):
    """A checkpoint that does not fit the compiled model: a tensor missing, extra, or of another shape."""


class ArtifactError(KokoroError):
    """A compiled artifact cannot be used: missing, damaged, or built for another TVM."""

    exit_code = 3
    http_status = 503


class ArtifactMissingError(ArtifactError, FileNotFoundError):
    """The directory lacks ``meta.json``, ``kokoro.so`` or ``weights.bin``."""


class ArtifactCorruptError(ArtifactError, ValueError):
    """The artifact's files are damaged, altered, of another format or of another TVM."""


class UnsupportedCPUError(KokoroError, ValueError):
    """An artifact was compiled for instructions this CPU does not have."""

    exit_code = 3
    http_status = 503


class UnwritablePathError(KokoroError, OSError):
    """An output path cannot be written (no such directory, not writable, a directory)."""

    exit_code = 1
    http_status = 500


class RequestCancelled(KokoroError):
    """The caller gave up on the request (a server's client went away, a ``cancel`` event was set)
    before it was done; nothing of it is kept."""

    exit_code = 130  # as for Ctrl-C
    http_status = 499  # nginx's "client closed request": nobody reads the answer
