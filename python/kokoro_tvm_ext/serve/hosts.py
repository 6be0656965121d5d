"""Which ``Host`` headers the server answers: the defence against DNS rebinding.

A web page can make a browser send requests to ``127.0.0.1`` under the page's own domain name (the
domain's DNS answer switches to a loopback or private address) and read the responses; the only trace
is that name in the ``Host`` header. A server that answers only the names it is reached by (loopback
names by default) refuses those requests. Patterns follow Starlette's ``TrustedHostMiddleware``: an
exact name or address, ``*.example.com`` for its subdomains, ``*`` for any host. Not that middleware
itself: it answers in plain text, not OpenAI's error shape, and cuts the port at the first colon, which
breaks IPv6 hosts such as ``[::1]:8880``.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from kokoro_tvm_ext.support.errors import InvalidInputError

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
ANY_ADDRESS = ("", "0.0.0.0", "::")  # a bind address that is no name: every interface


def host_of(header: str | None) -> str | None:
    """The host name or address in a ``Host`` header (lower case, without port or IPv6 brackets);
    None if there is none or it is malformed."""
    if not header:
        return None
    try:
        parts = urlsplit(f"//{header}")
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return (parts.hostname or "").rstrip(".") or None


def _pattern(text: str) -> str:
    pattern = text.strip().lower()
    if pattern == "*":
        return pattern
    if pattern.startswith("[") and pattern.endswith("]"):  # an IPv6 address as written in a URL
        pattern = pattern[1:-1]
    if pattern.startswith("*."):
        rest = pattern[2:]
    else:
        rest = pattern
    try:
        ipaddress.ip_address(rest)
        valid = not pattern.startswith("*.")
    except ValueError:
        valid = bool(rest) and "*" not in rest and host_of(rest) == rest.rstrip(".")
    if not valid:
        raise InvalidInputError(
            f"--allowed-hosts: {text!r} is not a host name, an address, '*.domain' or '*' "
            "(give names without scheme or port, e.g. --allowed-hosts tts.example.com,192.168.1.5)"
        )
    return pattern.rstrip(".")


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """``--allowed-hosts a,b,c`` -> checked patterns."""
    patterns = tuple(_pattern(p) for p in text.split(",") if p.strip())
    if not patterns:
        raise InvalidInputError("--allowed-hosts is empty: give host names, or '*' to answer any host")
    return patterns


def default_allowed_hosts(bind: str) -> tuple[str, ...]:
    """The loopback names, plus the bind address when it is one specific name or address."""
    bind = bind.strip().lower().strip("[]")
    if bind in ANY_ADDRESS or bind in LOOPBACK_HOSTS:
        return LOOPBACK_HOSTS
    return (*LOOPBACK_HOSTS, bind)


class TrustedHosts:
    """``allows(host_header)``: whether a request's ``Host`` names this server."""

    def __init__(self, patterns: tuple[str, ...]):
        self.patterns = tuple(p.lower() for p in patterns)
        self.any = "*" in self.patterns

    def allows(self, header: str | None) -> bool:
        if self.any:
            return True
        host = host_of(header)
        if host is None:
            return False
        return any(host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in self.patterns)

    def describe(self) -> str:
        return ", ".join(self.patterns)
