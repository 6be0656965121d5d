"""The bounds, hosts and keys built from options in one place (``serve/options.py``) for `kokoro-tvm serve`
and the Ray Serve deployment: defaults, the checks and their one-line errors in each one's terms."""

from __future__ import annotations

import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.serve.hosts import LOOPBACK_HOSTS
from kokoro_tvm_ext.serve.options import BOUNDS, GuardConfig, exposure_warning, guard_config


def test_the_bounds_default_hosts_and_keys():
    config = guard_config(host="0.0.0.0", environ={})
    assert config == GuardConfig(allowed_hosts=LOOPBACK_HOSTS)
    assert (config.max_connections, config.header_timeout, config.body_timeout) == (256, 10.0, 30.0)
    assert guard_config(host="192.168.1.5", environ={}).allowed_hosts == (*LOOPBACK_HOSTS, "192.168.1.5")
    config = guard_config(
        host="::", allowed_hosts=["tts.lan", "*.example.com"], api_keys=["k-1"], environ={}, body_timeout=5
    )
    assert config.allowed_hosts == ("tts.lan", "*.example.com") and config.api_keys == ("k-1",)
    assert config.body_timeout == 5 and "k-1" not in repr(config)
    assert set(BOUNDS) == {
        "max_body_bytes",
        "max_requests",
        "max_client_requests",
        "request_timeout",
        "body_timeout",
        "header_timeout",
        "max_connections",
    }


@pytest.mark.parametrize(
    "bounds, words",
    [
        ({"max_connections": 0}, "max_connections must be at least 1, got 0"),
        ({"max_requests": 2.5}, "max_requests must be a whole number, got 2.5"),
        ({"body_timeout": float("inf")}, "body_timeout must be a positive number of seconds, got inf"),
        ({"header_timeout": -1}, "header_timeout must be a positive number of seconds"),
        ({"request_timeout": "300"}, "request_timeout must be a positive number of seconds, got '300'"),
        ({"max_conections": 5}, "unknown bound(s) max_conections; the bounds are"),
    ],
)
def test_a_bad_bound_is_one_line_naming_it(bounds, words):
    with pytest.raises(InvalidInputError) as info:
        guard_config(host="127.0.0.1", environ={}, **bounds)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_the_warning_is_for_a_keyless_server_beyond_loopback_only():
    open_config = guard_config(host="0.0.0.0", environ={})
    warning = exposure_warning(open_config, "0.0.0.0", "--api-key-file FILE")
    assert "listening on 0.0.0.0 WITHOUT an API key" in warning and "--api-key-file FILE" in warning
    assert exposure_warning(open_config, "127.0.0.1", "x") is None
    assert exposure_warning(guard_config(host="::", api_keys=["k"], environ={}), "::", "x") is None


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--body-timeout", "0"], "--body-timeout must be a positive number of seconds"),
        (["--header-timeout", "inf"], "--header-timeout must be a positive number of seconds"),
        (["--max-connections", "0"], "--max-connections must be at least 1"),
    ],
)
def test_cli_flags_are_checked_before_the_model_loads(capsys, argv, words):
    from kokoro_tvm_ext.cli import main

    assert main(["serve", "--artifact", "/nonexistent", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_cli_help_names_the_new_flags(capsys):
    from kokoro_tvm_ext.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = capsys.readouterr().out
    for flag in ("--max-connections", "--header-timeout", "--body-timeout", "--docs", "IPv6 /64"):
        assert flag in text, flag


@pytest.mark.parametrize(
    "args, words",
    [
        ({"max_body_bytes": "1MiB"}, "max_body_bytes='1MiB' must be a whole number"),
        ({"body_timeout": "soon"}, "body_timeout='soon' must be a number"),
        ({"docs": "maybe"}, "docs='maybe' must be true or false"),
        ({"max_connections": "8"}, "Ray Serve's proxy holds the connections"),
        ({"allowed_hosts": "http://x/"}, "not a host name"),
        ({"max_requests": "0"}, "max_requests must be at least 1"),
        ({"max_input_chars": "0"}, "max_input_chars must be at least 1"),
        ({"max_batch_size": "2"}, "unknown argument(s) max_batch_size; known:"),
        ({"port": "9000"}, "port: Ray's proxy listens on its http_options port"),
        ({"wyoming": "tcp://0.0.0.0:10200"}, "wyoming: Ray's proxy carries HTTP only"),
        ({"first_chunk_tokens": "-1"}, "first_chunk_tokens must be 0 or more"),
        ({"max_batch": "0"}, "max_batch must be at least 1"),
        ({"threads": "many"}, "threads='many' must be a whole number"),
    ],
)
def test_the_ray_serve_builders_arguments_are_checked_in_one_line(tmp_path, args, words):
    pytest.importorskip("ray.serve")
    from kokoro_tvm_ext.serve.ray_deployment import app_builder

    with pytest.raises(InvalidInputError) as info:
        app_builder({"artifact": str(tmp_path), **args})
    assert words in str(info.value) and "\n" not in str(info.value)
