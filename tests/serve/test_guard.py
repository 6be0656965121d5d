"""The request guard over real sockets, on the app with a stand-in Speaker (``fakes.py``, no model):
body limit before parsing, Host check, in-flight limits, deadline, cancellation, request ids."""

from __future__ import annotations

import json
import logging
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fakes import fake_server

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.serve.hosts import TrustedHosts, default_allowed_hosts, parse_allowed_hosts

LOOPBACK = ("localhost", "127.0.0.1", "::1")


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert r.headers["x-request-id"].startswith("req_")
    return body["error"]


def speech(url, text, client=httpx, **body):
    return client.post(f"{url}/v1/audio/speech", json={"input": text, "response_format": "pcm", **body}, timeout=30)


def raw_request(url: str, head: bytes, body: bytes = b"", rcvbuf: int | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    sock.sendall(head + body)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.fixture(scope="module")
def server():
    """Loopback hosts only, 64 KiB bodies, 2 requests per client and 3 in all."""
    with fake_server(
        allowed_hosts=LOOPBACK, max_body_bytes=64 << 10, max_client_requests=2, max_requests=3, request_timeout=30
    ) as started:
        yield started


def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(server):
    url, _ = server
    start = time.monotonic()
    sock = raw_request(
        url,
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: 300000000\r\n\r\n",
        b'{"input": "',
    )
    with sock:
        answer = read_until_closed(sock)  # the server closes the connection: the 300 MB are never read
    assert time.monotonic() - start < 2
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"x-request-id: req_" in head
    err = json.loads(body)["error"]
    assert err["code"] == "request_too_large" and "300000000" in err["message"] and "65536" in err["message"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(server):
    """No Content-Length to refuse on: the 413 comes as soon as the limit is passed, before the body ends."""
    url, _ = server
    piece = b"x" * 8192
    sock = raw_request(
        url,
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(9)),  # 72 KiB, no final chunk
    )
    with sock:
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert "more than 65536 bytes arrived" in json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]


def test_a_body_within_the_limit_is_served(server):
    url, _ = server
    r = speech(url, "one two", padding="x" * (60 << 10))  # an unknown field, ignored, inside 64 KiB
    assert r.status_code == 200 and len(r.content) == 2 * 2 * 24000


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "LOCALHOST.", "[::1]"])
def test_loopback_hosts_are_answered(server, host):
    url, _ = server
    port = url.rsplit(":", 1)[1]
    assert httpx.get(f"{url}/health", headers={"host": f"{host}:{port}"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", "localhost.evil.example"])
def test_an_unknown_host_is_refused(server, host):
    url, _ = server
    r = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hi."}, headers={"host": host})
    err = error_of(r, 400)
    assert (
        err["code"] == "host_not_allowed" and "DNS rebinding" in err["message"] and "--allowed-hosts" in err["message"]
    )


def test_a_request_without_host_is_refused(server):
    url, _ = server
    with raw_request(url, b"GET /health HTTP/1.0\r\n\r\n") as sock:
        assert read_until_closed(sock).startswith(b"HTTP/1.1 400 ")


def test_requests_beyond_the_limits_get_429_and_the_rest_are_served(server):
    """Two requests held in planning from 127.0.0.1: its third is refused; one from 127.0.0.2 makes three
    in all, so 127.0.0.3's is refused too. Listings stay free; released, every held request completes."""
    url, speaker = server
    speaker.release.clear()
    other = {f"127.0.0.{n}": httpx.Client(transport=httpx.HTTPTransport(local_address=f"127.0.0.{n}")) for n in (2, 3)}
    with ThreadPoolExecutor(3) as pool:
        held = [pool.submit(speech, url, "hold") for _ in range(2)]
        for _ in range(2):
            assert speaker.planning.acquire(timeout=10)
        err = error_of(speech(url, "one"), 429)
        assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded")
        assert "127.0.0.1" in err["message"] and "--max-client-requests" in err["message"]
        held.append(pool.submit(speech, url, "hold", other["127.0.0.2"]))
        assert speaker.planning.acquire(timeout=10)
        busy = speech(url, "one", other["127.0.0.3"])
        assert "--max-requests" in error_of(busy, 429)["message"] and busy.headers["retry-after"] == "1"
        assert httpx.get(f"{url}/health").status_code == 200
        speaker.release.set()
        assert [f.result().status_code for f in held] == [200, 200, 200]
    assert speech(url, "one two").status_code == 200  # their slots are free again
    for client in other.values():
        client.close()


def test_an_internal_error_answers_only_the_request_id_and_logs_the_traceback(server, caplog):
    url, _ = server
    with caplog.at_level(logging.ERROR, logger="kokoro_tvm_ext.serve"):
        r = speech(url, "crash")
    err = error_of(r, 500)
    rid = r.headers["x-request-id"]
    assert rid in err["message"] and (err["type"], err["code"]) == ("server_error", "internal_error")
    for internal in ("Traceback", "RuntimeError", "secret", "/srv/"):
        assert internal not in r.text
    logged = [rec for rec in caplog.records if rid in rec.getMessage()]
    assert logged and logged[0].exc_info and "secret detail" in str(logged[0].exc_info[1])


def test_request_cancelled_is_499(server):
    err = error_of(speech(server[0], "cancelled"), 499)
    assert err["code"] == "request_cancelled"


def test_a_client_that_leaves_during_planning_stops_it(server):
    url, speaker = server
    before = speaker.cancelled_plans
    body = json.dumps({"input": "slow"}).encode()
    sock = raw_request(
        url,
        b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body),
        body,
    )
    assert speaker.planning.acquire(timeout=10)
    sock.close()
    deadline = time.monotonic() + 5
    while speaker.cancelled_plans == before:
        assert time.monotonic() < deadline, "planning went on after its client left"
        time.sleep(0.02)


def test_past_its_deadline_planning_stops_and_the_answer_is_504():
    with fake_server(request_timeout=0.3) as (url, speaker):
        start = time.monotonic()
        err = error_of(speech(url, "slow"), 504)
        assert time.monotonic() - start < 3 and speaker.cancelled_plans == 1
        assert (err["type"], err["code"]) == ("server_error", "timeout") and "--request-timeout" in err["message"]
        assert speech(url, "one").status_code == 200


def test_past_its_deadline_a_started_stream_is_cut_and_its_chunks_dropped():
    """The second chunk cannot be made in time (0.3 s plus the 0.1 s of audio sent): the client gets the
    first chunk, then a broken stream, never a stream that looks complete; the third chunk is never made."""
    with fake_server(chunk_seconds=0.1, request_timeout=0.3) as (url, speaker):
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream(
                "POST",
                f"{url}/v1/audio/speech",
                json={"input": "one stall three", "response_format": "pcm"},
                timeout=10,
            ) as r:
                assert r.status_code == 200
                for data in r.iter_raw():
                    got += data
        assert len(got) == 2 * 2400  # the first chunk's pcm
        speaker.release.set()
        deadline = time.monotonic() + 5
        while (stats := httpx.get(f"{url}/health").json()["scheduler"])["requests_cancelled"] < 1:
            assert time.monotonic() < deadline, stats
            time.sleep(0.02)
        assert speaker.synthesized == 2 and stats["chunks_cancelled"] == 1


def test_allowed_hosts_parse_and_match():
    assert default_allowed_hosts("0.0.0.0") == LOOPBACK and default_allowed_hosts("::") == LOOPBACK
    assert default_allowed_hosts("192.168.1.5") == (*LOOPBACK, "192.168.1.5")
    hosts = TrustedHosts(parse_allowed_hosts("TTS.example.com, *.lan,[fe80::1]"))
    assert hosts.allows("tts.example.com:443") and hosts.allows("box.lan") and hosts.allows("[fe80::1]:8880")
    assert not hosts.allows("lan") and not hosts.allows("example.com") and not hosts.allows("127.0.0.1")
    assert not hosts.allows("a.lan:port") and not hosts.allows(None)
    assert TrustedHosts(parse_allowed_hosts("*")).allows("anything.example")
    for bad in ("http://x.example", "x.example:80", "*x.example", "a*.b", " , "):
        with pytest.raises(InvalidInputError, match="--allowed-hosts"):
            parse_allowed_hosts(bad)


def test_bad_flags_are_one_line_before_the_model_loads(capsys):
    from kokoro_tvm_ext.cli import main

    for argv, words in [
        (["--allowed-hosts", "http://x.example/"], "not a host name"),
        (["--max-body-bytes", "0"], "--max-body-bytes must be at least 1"),
        (["--request-timeout", "nan"], "--request-timeout must be a positive number"),
    ]:
        assert main(["serve", "--artifact", "/nonexistent", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
