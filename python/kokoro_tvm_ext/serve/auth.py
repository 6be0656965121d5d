"""API keys: which keys the server takes, read from flags, a file or the environment, and the check of a request's
``Authorization: Bearer KEY`` header.

A key is compared with every configured key in constant time (``hmac.compare_digest``), all of them each time,
so neither the answer's timing nor its order tells which key came close. A key is never logged or echoed: errors
about a key file name its line, not its text.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from kokoro_tvm_ext.serve.option_files import entries
from kokoro_tvm_ext.support.errors import InvalidInputError

KEYS_ENV = "KOKORO_TVM_API_KEYS"  # comma-separated keys, added to the flags' and the file's
# Routes answered without a key: the health check, the web page's own files (its API calls carry the key the
# user typed in) and the metrics (a scrape usually comes from the operator's network; see docs/server.md).
OPEN_PATHS = ("/health", "/metrics")
OPEN_PREFIXES = ("/web",)


def _checked(key: str, where: str) -> str:
    """``key`` stripped; InvalidInputError naming ``where`` (never the key) if it cannot be sent as a Bearer token."""
    key = key.strip()
    if not key:
        raise InvalidInputError(f"{where}: the API key is empty")
    if any(c.isspace() or not c.isprintable() or not c.isascii() for c in key):
        raise InvalidInputError(
            f"{where}: an API key must be printable ASCII without spaces (it is sent in an Authorization header)"
        )
    return key


def read_key_file(path: str | Path) -> list[str]:
    """Keys in ``path``, one a line; blank lines and ``#`` comments skipped. InvalidInputError naming the file if
    it cannot be read or holds no key."""
    keys = [_checked(line, where) for line, where in entries(path, "--api-key-file")]
    if not keys:
        raise InvalidInputError(f"--api-key-file {path}: holds no key (one key a line; '#' starts a comment)")
    return keys


def collect_keys(flags: list[str] | None, files: list[str] | None, environ=os.environ) -> tuple[str, ...]:
    """Every key the server takes: ``--api-key`` flags, ``--api-key-file`` files and ``KOKORO_TVM_API_KEYS``."""
    keys = [_checked(k, "--api-key") for k in flags or ()]
    for path in files or ():
        keys += read_key_file(path)
    keys += [_checked(k, KEYS_ENV) for k in environ.get(KEYS_ENV, "").split(",") if k.strip()]
    return tuple(dict.fromkeys(keys))


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or any(path == p or path.startswith(p + "/") for p in OPEN_PREFIXES)


class ApiKeys:
    """``refusal(path, authorization)``: None if the request may go on, else ``(message, code)`` of its 401."""

    def __init__(self, keys: tuple[str, ...]):
        self._keys = tuple(k.encode() for k in keys)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def _known(self, given: bytes) -> bool:
        return any([hmac.compare_digest(given, key) for key in self._keys])  # a list: every key compared

    def refusal(self, path: str, authorization: str | None) -> tuple[str, str] | None:
        if not self._keys or is_open(path):
            return None
        scheme, _, token = (authorization or "").strip().partition(" ")
        if not authorization:
            return (
                "no API key: this server needs one, sent as the header 'Authorization: Bearer KEY' "
                "(the openai client sends its api_key so)",
                "missing_api_key",
            )
        if scheme.lower() != "bearer" or not token.strip():
            return "the Authorization header must be 'Bearer KEY'", "invalid_api_key"
        if not self._known(token.strip().encode("latin-1", "replace")):
            return "the API key is not one this server takes", "invalid_api_key"
        return None
