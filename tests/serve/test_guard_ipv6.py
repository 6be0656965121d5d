"""The per-client limit counts an IPv6 client by its /64 (one host usually holds a whole /64): the key, and
real requests from two addresses of one /64. Those addresses exist in a network namespace of the test's
own (loopback with two addresses added, as root or with unprivileged user namespaces, as the Ray tests
run), where the test runs itself again."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fakes import fake_server
from kokoro_harness.local_ray import WRAPPER
from system_tools import require

from kokoro_tvm_ext.serve.limits import client_key

ROOT = Path(__file__).resolve().parents[2]
SAME_64 = ("fd00:4848::1", "fd00:4848::2")


@pytest.mark.parametrize(
    "address, key",
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::1", "::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),  # a dual-stack socket's IPv4 client is that IPv4 address
        ("proxy-said-this", "proxy-said-this"),
        (None, "unknown"),
    ],
)
def test_the_client_key_is_an_ipv4_address_or_an_ipv6_64(address, key):
    assert client_key(address) == key


def _have(addresses) -> bool:
    try:
        for address in addresses:
            with socket.socket(socket.AF_INET6) as s:
                s.bind((address, 0))
    except OSError:
        return False
    return True


def _run_in_a_namespace_with_the_addresses(test: str) -> None:
    require("ip", "unshare")
    if subprocess.run(["bash", ROOT / WRAPPER, "true"], capture_output=True).returncode != 0:
        pytest.skip("no network namespace here (needs root or unprivileged user namespaces)")
    add = " && ".join(f"ip -6 addr add {a}/128 dev lo nodad" for a in SAME_64)
    result = subprocess.run(
        ["bash", ROOT / WRAPPER, "sh", "-c", f'{add} && exec "$@"', "sh"]
        + [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings", f"{__file__}::{test}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and " passed" in result.stdout, f"{result.stdout[-4000:]}\n{result.stderr[-2000:]}"


def test_two_addresses_of_one_64_share_the_per_client_limit():
    if not _have(SAME_64):
        _run_in_a_namespace_with_the_addresses("test_two_addresses_of_one_64_share_the_per_client_limit")
        return
    with fake_server(host="::", max_client_requests=1) as (url, speaker):
        port = url.rsplit(":", 1)[1]

        def speech(text, source, to="[::1]"):
            with httpx.Client(transport=httpx.HTTPTransport(local_address=source)) as client:
                body = {"input": text, "response_format": "pcm"}
                return client.post(f"http://{to}:{port}/v1/audio/speech", json=body, timeout=30)

        speaker.release.clear()
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(speech, "hold", SAME_64[0])
            assert speaker.planning.acquire(timeout=10)
            neighbour = speech("one", SAME_64[1])
            assert neighbour.status_code == 429, neighbour.text
            assert "fd00:4848::/64" in neighbour.json()["error"]["message"]
            assert speech("one", "::1").status_code == 200  # another /64
            assert speech("one", "127.0.0.1", to="127.0.0.1").status_code == 200  # IPv4, through the same socket
            speaker.release.set()
            assert held.result().status_code == 200
        assert speech("one", SAME_64[1]).status_code == 200  # the /64's slot is free again
