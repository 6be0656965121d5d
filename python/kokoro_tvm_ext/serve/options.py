"""The HTTP server's bounds, allowed hosts and API keys, built from options in one place for `kokoro-tvm serve`
and the Ray Serve deployment (``ray_deployment.py``), and the warning both print when they listen beyond loopback
without a key.

Light on purpose (no web stack): the CLI checks its flags here before it imports FastAPI or loads a model.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from kokoro_tvm_ext.serve.auth import KEYS_ENV, collect_keys
from kokoro_tvm_ext.serve.hosts import LOOPBACK_HOSTS, default_allowed_hosts, parse_allowed_hosts
from kokoro_tvm_ext.support.errors import InvalidInputError

MAX_INPUT_CHARS = 10_000  # the longest text of one request (HTTP and Wyoming)
WYOMING_URI = "tcp://127.0.0.1:10200"  # where `kokoro-tvm wyoming` listens by default: Wyoming's usual TTS port
# Fields counted in whole things, and fields in seconds (each must be finite and positive).
COUNTS = ("max_body_bytes", "max_requests", "max_client_requests", "max_connections")
SECONDS = ("request_timeout", "body_timeout", "header_timeout")


@dataclass(frozen=True)
class GuardConfig:
    """The server's bounds on its connections and requests (``kokoro-tvm serve`` sets each from its flag of the
    same name; docs/server.md lists them). The guard (``guard.py``) applies the request bounds; the listener
    (``listen.py``) ``max_connections`` and ``header_timeout``, which Ray Serve's own proxy does not take.
    ``allowed_hosts``: ``("*",)`` answers any host; ``kokoro-tvm serve`` defaults to the loopback names and its
    bind address (``hosts.default_allowed_hosts``). ``api_keys``: the keys a request must bring as
    ``Authorization: Bearer KEY`` (none: the server is open)."""

    max_body_bytes: int = 1 << 20
    max_requests: int = 64
    max_client_requests: int = 16
    request_timeout: float = 300.0
    body_timeout: float = 30.0
    header_timeout: float = 10.0
    max_connections: int = 256
    allowed_hosts: tuple[str, ...] = ("*",)
    api_keys: tuple[str, ...] = field(default=(), repr=False)  # never in a log line

    def check(self, *, as_flags: bool = False) -> None:
        """Each bound in range: one InvalidInputError naming the option (``--max-body-bytes`` when
        ``as_flags``, else ``max_body_bytes``)."""
        for name in COUNTS:
            check_count(name, getattr(self, name), as_flags=as_flags)
        for name in SECONDS:
            check_seconds(name, getattr(self, name), as_flags=as_flags)


BOUNDS = tuple(f.name for f in fields(GuardConfig) if f.name not in ("allowed_hosts", "api_keys"))


def option_name(name: str, as_flags: bool) -> str:
    return f"--{name.replace('_', '-')}" if as_flags else name


def check_seconds(name: str, value, *, as_flags: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InvalidInputError(f"{option_name(name, as_flags)} must be a positive number of seconds, got {value!r}")


def check_count(name: str, value, *, as_flags: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{option_name(name, as_flags)} must be a whole number, got {value!r}")
    if value < 1:
        raise InvalidInputError(f"{option_name(name, as_flags)} must be at least 1, got {value}")


def check_scheduling(max_batch, first_chunk_tokens, *, as_flags: bool = False) -> None:
    """How a server shares its model (``max_batch``, ``first_chunk_tokens``; HTTP and Wyoming), in range."""
    check_count("max_batch", max_batch, as_flags=as_flags)
    if isinstance(first_chunk_tokens, bool) or not isinstance(first_chunk_tokens, int) or first_chunk_tokens < 0:
        name = option_name("first_chunk_tokens", as_flags)
        raise InvalidInputError(f"{name} must be 0 or more, got {first_chunk_tokens!r}")


def guard_config(
    *,
    host: str,
    allowed_hosts: str | Sequence[str] | None = None,
    api_keys: Sequence[str] = (),
    api_key_files: Sequence[str] = (),
    as_flags: bool = False,
    environ=os.environ,
    **bounds,
) -> GuardConfig:
    """The checked config: ``allowed_hosts`` (comma-separated or a list; None: the loopback names and ``host``,
    the address the server listens on), the keys of ``api_keys``, the files ``api_key_files`` and
    ``KOKORO_TVM_API_KEYS``, and the bounds given by name (the rest keep their defaults)."""
    unknown = set(bounds) - set(BOUNDS)
    if unknown:
        raise InvalidInputError(f"unknown bound(s) {', '.join(sorted(unknown))}; the bounds are {', '.join(BOUNDS)}")
    if allowed_hosts is None:
        hosts = default_allowed_hosts(host)
    else:
        hosts = parse_allowed_hosts(allowed_hosts if isinstance(allowed_hosts, str) else ",".join(allowed_hosts))
    config = GuardConfig(
        allowed_hosts=hosts, api_keys=collect_keys(list(api_keys), list(api_key_files), environ), **bounds
    )
    config.check(as_flags=as_flags)
    return config


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable from this machine only."""
    host = host.strip().strip("[]").lower()
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def exposure_warning(config: GuardConfig, host: str, give_key: str) -> str | None:
    """The warning for a server on ``host`` without a key, if it listens beyond loopback; ``give_key`` says how
    to give one in the caller's terms (``--api-key-file FILE``, ``api_key_file=FILE``)."""
    if config.api_keys or is_loopback(host):
        return None
    return (
        f"WARNING: listening on {host} WITHOUT an API key: anyone who can reach this address can use the server. "
        f"Give {give_key}, or set {KEYS_ENV}, or listen on 127.0.0.1 behind a proxy that checks clients"
    )
