"""Bounds on what one request, or one client, may hold: the request body's size and the requests in flight.

Both are checked before any work: the body is read by counting (``read_body`` stops at the limit,
whatever ``Content-Length`` said or with a chunked body), and a request over a concurrency limit is
refused before its body is read. A client is an IPv4 address or an IPv6 /64 (``client_key``).
"""

from __future__ import annotations

import ipaddress
from collections import Counter

IPV6_CLIENT_PREFIX = 64  # what one subscriber, one LAN or one cloud machine is given


class BodyTooLarge(Exception):
    """The request body passed the server's limit; nothing more of it was read."""


class ClientLeft(Exception):
    """The client closed the connection before it had sent the whole body."""


async def read_body(receive, limit: int) -> bytes:
    """The request's whole body from the ASGI ``receive``, refusing it (BodyTooLarge) as soon as
    more than ``limit`` bytes have arrived."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientLeft()
        body += message.get("body", b"")
        if len(body) > limit:
            raise BodyTooLarge()
        if not message.get("more_body", False):
            return bytes(body)


def replay(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` as the request, then passes on to ``receive`` (which, the
    body being read, only ever answers ``http.disconnect``)."""
    given = False

    async def receive_replayed():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_replayed


def client_key(address: str | None) -> str:
    """What the per-client limit counts by: an IPv4 address itself; an IPv6 address by its /64, since one
    host usually holds a whole /64 and could otherwise take a new address per request; an IPv4-mapped IPv6
    address as its IPv4 address. Anything else (no address, a Unix socket's) as it is."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)


class InFlight:
    """Requests in progress, in all and per client (a ``client_key``). ``enter`` admits a request or names the
    limit it would pass; ``leave`` when its response is done. Used on the event loop's thread only."""

    def __init__(self, total: int, per_client: int):
        self.total, self.per_client = total, per_client
        self.count = 0
        self.by_client: Counter[str] = Counter()

    def enter(self, client: str) -> str | None:
        """None if admitted; else the refusal's message."""
        if self.by_client[client] >= self.per_client:
            return (
                f"too many requests in flight from {client}: this server takes {self.per_client} at a time "
                "from one client (--max-client-requests); send the next when one has finished"
            )
        if self.count >= self.total:
            return (
                f"the server is busy: {self.total} requests are in flight, its limit (--max-requests); "
                "retry in a moment"
            )
        self.count += 1
        self.by_client[client] += 1
        return None

    def leave(self, client: str) -> None:
        self.count -= 1
        self.by_client[client] -= 1
        if not self.by_client[client]:
            del self.by_client[client]
