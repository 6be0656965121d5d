"""API keys: the app on a stand-in Speaker with keys, over a real socket, with httpx and the official openai client;
the key file and the flags read by the CLI; the warning when listening beyond this machine without a key."""

from __future__ import annotations

import subprocess
import sys

import httpx
import numpy as np
import pytest
from fakes import SAMPLE_RATE, fake_server

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.serve.auth import KEYS_ENV, collect_keys, read_key_file

KEYS = ("first-key-0123", "second-key-4567")
CHUNK_SECONDS = 0.1


@pytest.fixture(scope="module")
def keyed():
    with fake_server(chunk_seconds=CHUNK_SECONDS, api_keys=KEYS) as started:
        yield started[0]


def bearer(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    "headers, code",
    [
        ({}, "missing_api_key"),
        (bearer("first-key-012"), "invalid_api_key"),  # a prefix of a key is no key
        (bearer("first-key-01234"), "invalid_api_key"),
        ({"authorization": f"Basic {KEYS[0]}"}, "invalid_api_key"),
        ({"authorization": "Bearer"}, "invalid_api_key"),
    ],
)
def test_a_request_without_a_right_key_is_401_in_openais_shape(keyed, headers, code):
    r = httpx.post(f"{keyed}/v1/audio/speech", json={"input": "one two"}, headers=headers)
    err = error_of(r, 401)
    assert err["code"] == code and err["type"] == "invalid_request_error"
    assert r.headers["www-authenticate"] == "Bearer"
    assert KEYS[0] not in r.text and "first-key" not in r.text  # a key is never echoed


@pytest.mark.parametrize("key", KEYS)
def test_each_key_opens_every_route(keyed, key):
    r = httpx.post(f"{keyed}/v1/audio/speech", json={"input": "one two", "response_format": "pcm"}, headers=bearer(key))
    assert r.status_code == 200, r.text
    assert len(r.content) == 2 * round(CHUNK_SECONDS * SAMPLE_RATE) * 2  # two words, two chunks of int16
    assert httpx.get(f"{keyed}/v1/models", headers=bearer(key)).status_code == 200
    assert httpx.get(f"{keyed}/v1/models").status_code == 401


def test_health_metrics_and_the_page_are_open(keyed):
    assert httpx.get(f"{keyed}/health").status_code == 200
    assert httpx.get(f"{keyed}/metrics").status_code == 200
    assert httpx.get(f"{keyed}/web/").status_code == 200
    # Only those: a path that merely starts like one is not.
    assert httpx.get(f"{keyed}/webhook").status_code == 401
    assert httpx.get(f"{keyed}/health/x").status_code == 401


def test_openai_client_missing_wrong_and_right_keys(keyed):
    openai = pytest.importorskip("openai")

    def client(key, **options):
        return openai.OpenAI(base_url=f"{keyed}/v1", api_key=key, max_retries=0, timeout=30, **options)

    no_key = {"Authorization": openai.Omit()}  # the client's way to send no Authorization header
    for key, headers in (("unused", no_key), ("not-a-key", None)):
        with pytest.raises(openai.AuthenticationError) as info:
            client(key).audio.speech.create(
                model="tts-1", voice="alloy", input="one", response_format="pcm", extra_headers=headers
            )
        assert info.value.status_code == 401
        assert info.value.body["code"] == ("missing_api_key" if headers else "invalid_api_key")
    audio = client(KEYS[1]).audio.speech.create(model="tts-1", voice="alloy", input="one", response_format="pcm")
    np.testing.assert_array_equal(np.frombuffer(audio.content, "<i2"), np.zeros(round(CHUNK_SECONDS * SAMPLE_RATE)))


def test_an_open_server_takes_any_request():
    with fake_server(chunk_seconds=CHUNK_SECONDS) as (url, _):
        assert httpx.post(f"{url}/v1/audio/speech", json={"input": "one"}).status_code == 200


def test_key_file_lines_comments_and_environment(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# the team's keys\nalpha-1\n\n  beta-2  # the CI's\n")
    assert read_key_file(keys) == ["alpha-1", "beta-2"]
    env = {KEYS_ENV: "gamma-3, alpha-1,"}
    assert collect_keys(["delta-4"], [str(keys)], env) == ("delta-4", "alpha-1", "beta-2", "gamma-3")
    assert collect_keys(None, None, {}) == ()


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "cannot read it"),
        ("", "holds no key"),
        ("# only a comment\n\n", "holds no key"),
        ("good-key\nbad key here\n", "line 2"),
    ],
)
def test_a_bad_key_file_is_one_line_naming_it_and_never_the_key(tmp_path, content, words):
    path = tmp_path / "keys.txt"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidInputError) as info:
        read_key_file(path)
    message = str(info.value)
    assert str(path) in message and words in message and "\n" not in message
    assert "bad key here" not in message


def serve_cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kokoro_tvm_ext.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_cli_refuses_an_unreadable_key_file_before_loading_anything(tmp_path):
    missing = tmp_path / "no-keys.txt"
    done = serve_cli("--api-key-file", str(missing), "--port", "0")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "Traceback" not in done.stderr


def test_cli_warns_loudly_when_listening_beyond_loopback_without_a_key(tmp_path):
    """An empty --artifact directory fails to load right after the start lines: they are all we need."""
    import os

    env = {k: v for k, v in os.environ.items() if k != KEYS_ENV}
    empty = tmp_path / "artifact"
    empty.mkdir()
    open_run = serve_cli("--host", "0.0.0.0", "--port", "0", "--artifact", str(empty), env=env)
    assert "WARNING" in open_run.stderr and "WITHOUT an API key" in open_run.stderr, open_run.stderr
    keyed_run = serve_cli("--host", "0.0.0.0", "--port", "0", "--artifact", str(empty), env={**env, KEYS_ENV: "k-1"})
    assert "WARNING" not in keyed_run.stderr and "k-1" not in keyed_run.stderr, keyed_run.stderr
    assert "loading the tvm backend" in keyed_run.stderr and keyed_run.returncode != 0


@pytest.mark.parametrize(
    "host, loopback",
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True)]
    + [("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("tts.lan", False)],
)
def test_which_bind_addresses_stay_on_this_machine(host, loopback):
    from kokoro_tvm_ext.serve.options import is_loopback

    assert is_loopback(host) is loopback


def test_the_ray_serve_deployment_warns_the_same_and_takes_keys_from_a_file(tmp_path, monkeypatch, capsys):
    """``host`` is where Ray's proxy listens; nothing is deployed here, the application is only built."""
    pytest.importorskip("ray.serve")
    from kokoro_tvm_ext.serve.ray_deployment import app_builder

    monkeypatch.delenv(KEYS_ENV, raising=False)
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    keys = tmp_path / "keys.txt"
    keys.write_text("ray-key-1\n")
    app_builder({"artifact": str(artifact), "host": "0.0.0.0"})
    err = capsys.readouterr().err
    assert "WARNING: listening on 0.0.0.0 WITHOUT an API key" in err and "api_key_file=FILE" in err, err
    for args in ({"host": "0.0.0.0", "api_key_file": str(keys)}, {"host": "127.0.0.1"}):
        app_builder({"artifact": str(artifact), **args})
        assert capsys.readouterr().err == ""
    with pytest.raises(InvalidInputError, match="api-key-file .*no-keys.txt: cannot read it"):
        app_builder({"artifact": str(artifact), "api_key_file": str(tmp_path / "no-keys.txt")})
