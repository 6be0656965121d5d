"""Every HTTP request's way in and out, as one ASGI middleware around the app.

In order: an id (``x-request-id`` on every response); the ``Host`` check (``hosts.py``); the API key
(``auth.py``: 401 with ``WWW-Authenticate: Bearer``, when the server has keys); the body: refused on a route
that takes none (413), on a speech route unless it is JSON (415: what keeps a cross-site form or a simple
``fetch`` from speaking), and by its size, first on ``Content-Length`` and then counting while it is read,
before anything parses it; the in-flight limits for the speech routes (per client, an IPv4 address or an
IPv6 /64, and in all, 429); the body's deadline (``body_timeout``: 408, the slot freed at once); then the
app, under the request's deadline and watched for its client leaving. Either ends the request at once: its
planning stops (``RequestContext.cancel``, which ``Speaker.plan`` checks), its queued chunks are dropped
(the streams it registered are cancelled), a response not yet started becomes a 504 (or nothing, for a
client that left) and a started stream is cut. An unexpected exception is logged with the request id and
answered with a 500 that holds only the id. A scope other than HTTP and lifespan (a WebSocket) is refused:
no route takes one, and none would pass the checks above.

The deadline is ``request_timeout`` seconds from arrival, moved later by the length of every chunk of
audio handed to the response: a client that plays the stream in real time is never cut, one that
stops reading is cut ``request_timeout`` seconds after it fell behind.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request

from kokoro_tvm_ext.serve.auth import ApiKeys
from kokoro_tvm_ext.serve.errors import error_response
from kokoro_tvm_ext.serve.hosts import TrustedHosts
from kokoro_tvm_ext.serve.limits import BodyTooLarge, ClientLeft, InFlight, client_key, read_body, replay
from kokoro_tvm_ext.serve.options import GuardConfig

log = logging.getLogger("kokoro_tvm_ext.serve")

REQUEST_ID_HEADER = "x-request-id"
DEADLINE, CLIENT_LEFT = "deadline", "client left"


class RequestContext:
    """What a route sees of the guard (``context_of(request)``): the request id, the event that stops its
    planning, ``extend`` to move the deadline by audio handed over, ``on_close`` for cleanups."""

    def __init__(self, request_id: str, deadline: float):
        self.id = request_id
        self.arrived = time.monotonic()
        self.deadline = deadline
        self.cancel = threading.Event()
        self.stopped: str | None = None  # DEADLINE or CLIENT_LEFT
        self.scope = anyio.CancelScope()
        self._closers: list = []

    def extend(self, seconds: float) -> None:
        self.deadline += seconds

    def on_close(self, closer) -> None:
        """``closer()`` when the request ends, however it ends (e.g. cancel its chunks on the scheduler)."""
        self._closers.append(closer)

    def stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
            self.cancel.set()
            self.scope.cancel()

    def close(self) -> None:
        for closer in self._closers:
            try:
                closer()
            except Exception:  # noqa: BLE001 - a cleanup must not hide the others
                log.exception("request %s: cleanup failed", self.id)


def context_of(request: Request) -> RequestContext:
    return request.scope["state"]["request_context"]


class _Response:
    """The app's ``send``, adding the request id to the headers and noting what was sent; once the request is
    stopped, the app's messages are dropped (its answer comes too late, or its client is gone)."""

    def __init__(self, send, ctx: RequestContext):
        self.raw, self.ctx = send, ctx
        self.started = self.complete = False

    async def send(self, message) -> None:
        if self.ctx.stopped:
            return
        await self.emit(message)

    async def emit(self, message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", self.ctx.id.encode())]}
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self.raw(message)


class RequestGuard:
    """The ASGI middleware (see the module's doc). ``limited_paths``: the speech routes, the only ones that
    take a body and the ones that count toward the in-flight limits (listings and ``/health`` stay free)."""

    def __init__(self, app, config: GuardConfig, limited_paths: frozenset[str]):
        self.app = app
        self.config = config
        self.limited_paths = limited_paths
        self.hosts = TrustedHosts(config.allowed_hosts)
        self.keys = ApiKeys(config.api_keys)
        self.in_flight = InFlight(config.max_requests, config.max_client_requests)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self._refuse_scope(scope, send)
            return
        ctx = RequestContext(f"req_{secrets.token_hex(12)}", anyio.current_time() + self.config.request_timeout)
        scope.setdefault("state", {})["request_context"] = ctx
        response = _Response(send, ctx)
        refusal = self._refusal(scope)
        if refusal is not None:
            await self._answer(response, scope, receive, *refusal)
            return
        client = client_key(scope["client"][0] if scope.get("client") else None)
        limited = scope["path"] in self.limited_paths
        if limited:
            busy = self.in_flight.enter(client)
            if busy is not None:
                await self._answer(
                    response,
                    scope,
                    receive,
                    429,
                    busy,
                    "rate_limit_exceeded",
                    type="requests",
                    headers={"retry-after": "1"},
                )
                return
        try:
            await self._run(scope, receive, response, ctx)
        finally:
            ctx.close()
            if limited:
                self.in_flight.leave(client)

    @staticmethod
    async def _refuse_scope(scope, send) -> None:
        """No route takes a WebSocket (closing before accepting answers its handshake with 403); a scope type
        this guard does not know is an error, as ASGI asks of an application."""
        if scope["type"] != "websocket":
            raise RuntimeError(f"the request guard does not know the ASGI scope type {scope['type']!r}")
        log.info("a WebSocket request for %s was refused: no route takes one", scope.get("path", "?")[:100])
        await send({"type": "websocket.close", "code": 1008})

    def _refusal(self, scope) -> tuple | None:
        """(status, message, code[, headers]) for a request refused on its headers alone, or None."""
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.hosts.allows(host):
            shown = repr(host[:100]) if host else "none"
            return (
                400,
                f"Host {shown} is not a name this server answers to ({self.hosts.describe()}); a request "
                "naming another host is refused against DNS rebinding. Start the server with "
                "--allowed-hosts NAME,... to add the names clients use",
                "host_not_allowed",
            )
        unauthorized = self.keys.refusal(scope["path"], headers.get("authorization"))
        if unauthorized is not None:
            return (401, *unauthorized, {"www-authenticate": "Bearer"})
        return self._body_refusal(scope, headers)

    def _body_refusal(self, scope, headers: Headers) -> tuple | None:
        """A body where the route takes none, one that is not JSON, or a ``Content-Length`` over the limit."""
        length = headers.get("content-length")
        size = int(length) if length is not None and length.isdigit() else None
        chunked = "transfer-encoding" in headers
        if not (chunked or size):
            return None
        if scope["path"] not in self.limited_paths:
            return (
                413,
                f"{scope['method']} {scope['path'][:100]} takes no request body, and this request has "
                f"{'a chunked one' if chunked else f'Content-Length: {size}'}; send it without a body (only "
                "the speech routes, POST /v1/audio/speech and /dev/..., take one)",
                "request_too_large",
            )
        media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "application/json" and not media_type.endswith("+json"):
            shown = repr(media_type[:100]) if media_type else "none"
            return (
                415,
                f"the request body must be JSON, sent with 'Content-Type: application/json' (the Content-Type "
                f"was {shown})",
                "unsupported_media_type",
            )
        if size is not None and size > self.config.max_body_bytes:
            return self._too_large(f"Content-Length is {size} bytes")
        return None

    def _too_large(self, what: str) -> tuple:
        return (
            413,
            f"the request body is too large: {what}, this server takes at most {self.config.max_body_bytes} "
            "(--max-body-bytes); the speech routes need only the JSON of the text",
            "request_too_large",
        )

    async def _answer(
        self, response: _Response, scope, receive, status, message, code, more_headers=None, **extra
    ) -> None:
        """An error answer from the guard itself; the connection closes after it, as the body may be unread."""
        headers = {"connection": "close", **(more_headers or {}), **extra.pop("headers", {})}
        kind = extra.pop("type", "invalid_request_error" if status < 500 else "server_error")
        await error_response(status, message, type=kind, code=code, headers=headers)(scope, receive, response.emit)

    async def _run(self, scope, receive, response: _Response, ctx: RequestContext) -> None:
        error: BaseException | None = None
        refusal = None
        async with anyio.create_task_group() as watchers:
            watchers.start_soon(self._watch_deadline, ctx)
            with ctx.scope:
                body = None
                try:
                    with anyio.move_on_after(self.config.body_timeout):
                        body = await read_body(receive, self.config.max_body_bytes)
                except BodyTooLarge:
                    refusal = self._too_large(f"more than {self.config.max_body_bytes} bytes arrived")
                except ClientLeft:
                    ctx.stop(CLIENT_LEFT)
                else:
                    if body is None:  # a slow client holds its slot no longer than this
                        refusal = (
                            408,
                            f"the request body did not arrive within {self.config.body_timeout:g} s "
                            "(--body-timeout); send the whole body at once",
                            "request_timeout",
                        )
                    else:
                        watchers.start_soon(self._watch_client, ctx, receive, response)
                        try:
                            await self.app(scope, replay(body, receive), response.send)
                        except Exception as err:  # noqa: BLE001 - answered below with the request id, never raised
                            error = err
            watchers.cancel_scope.cancel()
        if refusal is not None:
            await self._answer(response, scope, receive, *refusal)
        elif ctx.stopped == DEADLINE:
            if response.started:
                log.warning(
                    "request %s: deadline passed (--request-timeout %g s plus the audio sent); its stream is cut",
                    ctx.id,
                    self.config.request_timeout,
                )
            else:
                await self._answer(
                    response,
                    scope,
                    receive,
                    504,
                    f"the request took longer than its deadline: {self.config.request_timeout:g} s "
                    "(--request-timeout) plus the length of the audio sent; try a shorter input or a less busy "
                    "server",
                    "timeout",
                )
        elif ctx.stopped == CLIENT_LEFT:
            log.info("request %s: the client left; its work is cancelled", ctx.id)
        elif error is not None:
            log.error("request %s: internal error on %s %s", ctx.id, scope["method"], scope["path"], exc_info=error)
            if not response.started:
                await self._answer(
                    response,
                    scope,
                    receive,
                    500,
                    f"internal error; request id {ctx.id} (the server's log has the details)",
                    "internal_error",
                )

    @staticmethod
    async def _watch_deadline(ctx: RequestContext) -> None:
        while (left := ctx.deadline - anyio.current_time()) > 0:
            await anyio.sleep(left)
        ctx.stop(DEADLINE)

    @staticmethod
    async def _watch_client(ctx: RequestContext, receive, response: _Response) -> None:
        """The body has been read, so ``receive`` answers only when the client disconnects (or, once the
        response is complete, at once)."""
        message = await receive()
        if message["type"] == "http.disconnect" and not response.complete:
            ctx.stop(CLIENT_LEFT)
