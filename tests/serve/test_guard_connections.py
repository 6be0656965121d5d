"""Hostile clients over real loopback sockets, on the app with a stand-in Speaker (``fakes.py``) served as
`kokoro-tvm serve` serves it (``listen.py``'s bounded connections): headers and bodies that trickle, too many
connections, bodies where no route takes one, cross-site simple requests, WebSockets, FastAPI's docs pages.
Deadlines here are seconds where the client would need a minute; the tests assert what was answered and
how much was sent, never how long it took."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest
from fakes import FakeSpeaker, FakeVoices, fake_server

from kokoro_tvm_ext.serve import listen
from kokoro_tvm_ext.serve.listen import MAX_HEADER_BYTES, MAX_HEADER_LINES

JSON = {"content-type": "application/json"}


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host.strip("[]"), int(port)), timeout=30)


def read_until_closed(sock: socket.socket, timeout: float = 30) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def read_response(sock: socket.socket) -> tuple[bytes, dict]:
    """One whole response (with a Content-Length) from ``sock``: its status line and JSON body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0], json.loads(body)


def error_of(answer: bytes, status: int) -> dict:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), answer[:300]
    return json.loads(body)["error"]


def trickle(sock: socket.socket, data: bytes, every: float = 1.0) -> tuple[int, bytes]:
    """Send ``data`` a byte every ``every`` seconds until the server answers or closes: (bytes sent, answer)."""
    sock.settimeout(every)
    sent, answer = 0, b""
    for byte in data:
        try:
            sock.send(bytes([byte]))
        except OSError:  # reset: the server closed the connection
            break
        sent += 1
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        answer += chunk
        if not chunk:
            break
    return sent, answer + read_until_closed(sock)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


HEAD = b"GET /health HTTP/1.1\r\nHost: localhost\r\nUser-Agent: " + b"slow" * 15 + b"\r\n\r\n"


@pytest.fixture(params=["httptools", "h11"])
def http_parser(request, monkeypatch):
    """uvicorn's parser: httptools when installed (as here), else h11; the bounds hold on both."""
    if request.param == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        monkeypatch.setattr(listen, "AutoHTTPProtocol", H11Protocol)
    return request.param


def test_headers_sent_a_byte_a_second_are_cut_off_by_the_header_deadline(http_parser):
    """The client would need 80 s to finish its headers; the server answers 408 and closes after its 2 s
    deadline, and serves the next client at once."""
    with fake_server(header_timeout=2) as (url, _):
        with connect(url) as sock:
            sent, answer = trickle(sock, HEAD)
        assert sent < len(HEAD) // 2, f"{sent} of {len(HEAD)} bytes were taken"
        err = error_of(answer, 408)
        assert err["code"] == "request_timeout" and "--header-timeout" in err["message"]
        assert httpx.get(f"{url}/health").status_code == 200


def test_the_next_requests_headers_are_due_too_after_a_response(http_parser):
    """A keep-alive connection that answered one request and then trickles the next is cut the same way
    (trickled bytes stop uvicorn's own keep-alive timer: the header deadline still runs)."""
    with fake_server(header_timeout=2) as (url, _):
        with connect(url) as sock:
            sock.sendall(HEAD)
            status, body = read_response(sock)
            assert status == b"HTTP/1.1 200 OK" and body["status"] == "healthy"
            sent, answer = trickle(sock, HEAD)
        assert sent < len(HEAD) // 2
        assert error_of(answer, 408)["code"] == "request_timeout"


def test_a_connection_that_sends_nothing_is_closed_silently():
    with fake_server(header_timeout=1) as (url, _):
        with connect(url) as sock:
            assert read_until_closed(sock) == b""


@pytest.mark.parametrize(
    "line", [b"X-Pad: " + b"p" * 1015 + b"\r\n", b"a:b\r\n"], ids=["over-the-bytes", "over-the-lines"]
)
def test_headers_over_the_limit_get_431(line):
    with fake_server() as (url, _):
        with connect(url) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
            try:
                for _ in range(2 * max(MAX_HEADER_BYTES // len(line), MAX_HEADER_LINES)):
                    sock.sendall(line)
            except OSError:
                pass  # closed while sending: the answer is in the socket
            answer = read_until_closed(sock)
        err = error_of(answer, 431)
        assert err["code"] == "headers_too_large" and str(MAX_HEADER_BYTES) in err["message"]
        assert httpx.get(f"{url}/health").status_code == 200


def test_250_connections_holding_the_largest_headers_allowed_hold_little_memory():
    """Each sends 63 KiB of headers in 1 KiB lines, within both limits, and never ends them. Without the line
    limit, 13,000 lines of 'a:b' each held 372 MB; these hold ~13 MB."""
    lines = b"".join(b"X-P%d: " % n + b"p" * 1000 + b"\r\n" for n in range(62))
    with fake_server(header_timeout=120) as (url, _):
        assert httpx.get(f"{url}/health").status_code == 200
        idle = rss_mb()
        socks = [connect(url) for _ in range(250)]
        for sock in socks:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + lines)
        time.sleep(0.5)  # for the server's loop to read them all (earlier, the test only measures less)
        assert httpx.get(f"{url}/health").status_code == 200
        grown = rss_mb() - idle
        for sock in socks:
            sock.close()
    assert grown < 50, f"RSS grew by {grown:.0f} MB"


def test_connections_beyond_the_cap_get_503_and_a_freed_one_lets_the_next_in(http_parser):
    with fake_server(max_connections=4, header_timeout=60) as (url, _):
        held = [connect(url) for _ in range(4)]
        for sock in held:
            sock.sendall(b"GET /health HTTP/1.1\r\n")  # a request begun, never finished
        with connect(url) as extra:
            err = error_of(read_until_closed(extra), 503)
        assert err["code"] == "too_many_connections" and "--max-connections" in err["message"]
        held.pop().close()
        for _ in range(400):  # the server sees the close as soon as its loop turns
            try:
                if httpx.get(f"{url}/health", timeout=10).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            pytest.fail("no connection was let in after one closed")
        for sock in held:
            sock.close()


def test_200_connections_trickling_bodies_to_health_are_refused_and_hold_no_memory():
    """Each names a 1 MiB body on GET /health, which takes none: each gets 413 at once, whatever it then
    sends; the server's memory stays within 50 MB of idle and a normal request is answered meanwhile."""
    with fake_server(header_timeout=60) as (url, _):
        assert httpx.get(f"{url}/health").status_code == 200
        idle = rss_mb()
        socks = [connect(url) for _ in range(200)]
        for sock in socks:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1048576\r\n\r\n" + b"x" * 1024)
        for _ in range(3):
            for sock in socks:
                try:
                    sock.send(b"x" * 1024)
                except OSError:
                    pass  # already closed by the server
            time.sleep(0.1)
        grown = rss_mb() - idle
        assert httpx.get(f"{url}/health").status_code == 200
        answers = [read_until_closed(sock) for sock in socks]
        for sock in socks:
            sock.close()
    assert grown < 50, f"RSS grew by {grown:.0f} MB"
    assert all(a.startswith(b"HTTP/1.1 413 ") for a in answers), {a[:40] for a in answers}
    assert "GET /health takes no request body" in error_of(answers[0], 413)["message"]


@pytest.mark.parametrize(
    "head",
    [
        b"GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello",
        b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ],
)
def test_a_body_on_a_route_that_takes_none_is_refused(head):
    with fake_server() as (url, _):
        with connect(url) as sock:
            sock.sendall(head)
            err = error_of(read_until_closed(sock), 413)
        assert "takes no request body" in err["message"] and "send it without a body" in err["message"]
        assert httpx.get(f"{url}/health", headers={"content-length": "0"}).status_code == 200


def test_a_body_that_trickles_to_a_speech_route_gets_408_and_frees_its_slot_at_once():
    """One slot per client: while the slow body holds it a second request gets 429; past the body's 1 s
    deadline the slow one gets 408 and the next request is served."""
    with fake_server(body_timeout=1, max_client_requests=1, header_timeout=60) as (url, speaker):
        with connect(url) as slow:
            slow.sendall(
                b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"input": '
            )
            for _ in range(400):  # until the guard has admitted the slow request
                busy = httpx.post(f"{url}/v1/audio/speech", json={"input": "one"}, timeout=10)
                if busy.status_code == 429:
                    break
                time.sleep(0.05)
            assert busy.status_code == 429, busy.text
            err = error_of(read_until_closed(slow), 408)
        assert err["code"] == "request_timeout" and "--body-timeout" in err["message"]
        spoken = speaker.synthesized
        r = httpx.post(f"{url}/v1/audio/speech", json={"input": "one", "response_format": "pcm"}, timeout=10)
        assert r.status_code == 200 and speaker.synthesized == spoken + 1


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded"]
)
def test_a_cross_site_simple_post_is_refused_without_synthesis(content_type):
    """What a page on another site can send without a CORS preflight: a POST with no Content-Type or a
    form's or text's, carrying JSON. Refused on its Content-Type, before its body is read."""
    body = json.dumps({"input": "speak for the attacker", "response_format": "pcm"}).encode()
    headers = {"origin": "https://evil.example"} | ({"content-type": content_type} if content_type else {})
    with fake_server() as (url, speaker):
        r = httpx.post(f"{url}/v1/audio/speech", content=body, headers=headers)
        assert r.status_code == 415, r.text
        assert r.json()["error"]["code"] == "unsupported_media_type"
        assert "Content-Type: application/json" in r.json()["error"]["message"]
        assert speaker.synthesized == 0 and r.headers.get("access-control-allow-origin") is None
        ok = httpx.post(
            f"{url}/v1/audio/speech", content=body, headers={"content-type": "application/json; charset=utf-8"}
        )
        assert ok.status_code == 200 and speaker.synthesized == 4


def test_fastapis_docs_are_off_unless_asked_for():
    from fastapi.testclient import TestClient

    from kokoro_tvm_ext.serve.app import create_app

    with fake_server() as (url, _):
        for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
            assert httpx.get(f"{url}{path}").status_code == 404, path
    with TestClient(create_app(FakeSpeaker(), voices=FakeVoices(), docs=True)) as client:
        assert client.get("/docs").status_code == 200
        assert "/v1/audio/speech" in client.get("/openapi.json").json()["paths"]


def test_the_lifespan_passes_the_guard():
    """The app's lifespan (its scheduler stopped at shutdown) is the one scope besides HTTP the guard lets in."""
    from fastapi.testclient import TestClient

    from kokoro_tvm_ext.serve.app import create_app

    app = create_app(FakeSpeaker(), voices=FakeVoices())
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200 and app.state.scheduler.alive
    assert not app.state.scheduler.alive


@pytest.mark.parametrize("keys", [(), ("a-key-0123",)])
def test_a_websocket_is_refused_by_the_guard(keys):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect as websocket

    with fake_server(api_keys=keys) as (url, speaker):
        headers = {"authorization": f"Bearer {keys[0]}"} if keys else {}
        for path in ("/v1/audio/speech", "/health", "/nowhere"):
            with pytest.raises(InvalidStatus) as refused:
                websocket(f"ws{url.removeprefix('http')}{path}", additional_headers=headers, open_timeout=10)
            assert refused.value.response.status_code == 403
        assert httpx.get(f"{url}/health").json()["status"] == "healthy"
