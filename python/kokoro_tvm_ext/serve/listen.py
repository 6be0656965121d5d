"""Run the app on uvicorn: a listening socket with a fixed send buffer, and connections bounded before any
request reaches the app.

A stream is paced by its client (``scheduler.py``: synthesis waits while the response cannot be
sent), but what the kernel accepts counts as sent. Left to autotuning, Linux grows a connection's
send buffer up to ``net.ipv4.tcp_wmem``'s maximum (4 MiB by default) for a client that reads nothing:
minutes of mp3 synthesized for nobody. Accepted connections inherit the listening socket's
``SO_SNDBUF``; 256 KiB still carries 5 MB/s at 50 ms of round trip, a hundred times a pcm stream's rate.

uvicorn itself takes every connection a client opens, waits for a request's headers as long as they
trickle in, and (with httptools) keeps headers of any size. Its protocol is wrapped here
(``BoundedConnection``): a connection beyond ``max_connections`` is answered 503 and closed at once; one
that has not sent a request's whole headers ``header_timeout`` seconds after it opened, or after its last
response, is closed (with a 408 if it had begun a request); headers over ``MAX_HEADER_BYTES`` or
``MAX_HEADER_LINES`` get 431 (the line count bounds the parsed headers' memory: a Python tuple per
line weighs ~30 times a 5-byte line).
The body's deadline and size are the guard's (``guard.py``), which knows the route.
"""

from __future__ import annotations

import http
import json
import logging
import socket
import time

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from kokoro_tvm_ext.serve.options import GuardConfig

SEND_BUFFER_BYTES = 256 << 10
MAX_HEADER_BYTES = 64 << 10  # a request line and headers; real clients send well under 8 KiB
MAX_HEADER_LINES = 128  # real clients send under 30
BUSY_LOG_INTERVAL = 60.0  # seconds between two log lines about refused connections

log = logging.getLogger("kokoro_tvm_ext.serve")


def listening_socket(config) -> socket.socket:
    """uvicorn's socket for ``config`` (a ``uvicorn.Config``), with the send buffer its connections inherit."""
    sock = config.bind_socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
    return sock


def raw_error(status: int, message: str, code: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response in OpenAI's error shape that closes the connection, for answers written
    before any request reached the app."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}", "content-type: application/json"]
    lines += [f"content-length: {len(body)}", "connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class BoundedConnection:
    """Mixed into uvicorn's HTTP protocol (h11's or httptools'), through the attributes both have: ``cycle``
    (the current request, replaced when a request's headers are complete), ``connections``, ``transport``,
    ``loop`` and the keep-alive timer (armed when the connection waits for its next request)."""

    bounds: GuardConfig
    _refused_at = -BUSY_LOG_INTERVAL  # when a refused connection was last logged (for every connection)

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_bytes = self._head_lines = 0  # received towards the next request's headers
        self._head_timer = None
        self._seen_cycle = self.cycle
        if len(self.connections) > self.bounds.max_connections:
            now = time.monotonic()
            if now - BoundedConnection._refused_at >= BUSY_LOG_INTERVAL:
                BoundedConnection._refused_at = now
                log.warning(
                    "%d connections are open, the limit (--max-connections); new ones get 503 until some close",
                    self.bounds.max_connections,
                )
            self._close_with(
                503,
                f"the server has {self.bounds.max_connections} connections open, its limit "
                "(--max-connections); retry in a moment",
                "too_many_connections",
                {"retry-after": "1"},
            )
            return
        self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        awaiting_head = self.cycle is None or not self.cycle.more_body
        super().data_received(data)
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            self._disarm()  # closed by the parser, or handed to a WebSocket protocol
        elif not self._new_request() and awaiting_head:
            self._head_bytes += len(data)
            self._head_lines += data.count(b"\n")
            if self._head_bytes > MAX_HEADER_BYTES or self._head_lines > MAX_HEADER_LINES:
                self._close_with(
                    431,
                    f"the request's headers passed {MAX_HEADER_BYTES} bytes or {MAX_HEADER_LINES} lines before "
                    "they ended; send fewer",
                    "headers_too_large",
                )

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._new_request()  # h11 starts a pipelined request from here
        if self.timeout_keep_alive_task is not None:  # idle: the next request's headers are due
            self._arm()

    def _new_request(self) -> bool:
        """Whether a request's headers were completed since the last look (the deadline met, the count reset)."""
        if self.cycle is self._seen_cycle:
            return False
        self._seen_cycle = self.cycle
        self._head_bytes = self._head_lines = 0
        self._disarm()
        return True

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.bounds.header_timeout, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return
        if not self._head_bytes:  # nothing asked: an idle connection just closes
            self.transport.close()
            return
        log.info("connection from %s: no whole request headers within --header-timeout; closed", self.client)
        self._close_with(
            408,
            f"the request's headers did not arrive within {self.bounds.header_timeout:g} s (--header-timeout); "
            "send them at once",
            "request_timeout",
        )

    def _close_with(self, status: int, message: str, code: str, headers: dict[str, str] | None = None) -> None:
        self._disarm()
        self.transport.write(raw_error(status, message, code, headers))
        self.transport.close()


def protocol_class(bounds: GuardConfig, base: type | None = None) -> type:
    """uvicorn's HTTP protocol ``base`` (default: httptools' if installed, else h11's) with ``bounds``'
    ``max_connections`` and ``header_timeout``."""
    base = base or AutoHTTPProtocol
    return type(f"Bounded{base.__name__}", (BoundedConnection, base), {"bounds": bounds})


def server_config(app, *, host: str, port: int, log_level: str, bounds: GuardConfig) -> uvicorn.Config:
    """The ``uvicorn.Config`` `kokoro-tvm serve` runs ``app`` with."""
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, http=protocol_class(bounds))


def run(app, *, host: str, port: int, log_level: str, bounds: GuardConfig) -> None:
    """Serve ``app`` until interrupted (as ``uvicorn.run`` does)."""
    config = server_config(app, host=host, port=port, log_level=log_level, bounds=bounds)
    uvicorn.Server(config).run(sockets=[listening_socket(config)])
