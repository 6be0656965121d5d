"""The speech server (``serve/app.py``) as a Ray Serve deployment, for many replicas on a cluster.

Each replica is one copy of the server's ASGI app with its own loaded artifact and
scheduler; Ray Serve's proxy spreads requests over the replicas and, with
autoscaling, adds or removes replicas by the number of requests in flight. Run it
with Ray's CLI (the arguments are this module's ``app_builder`` keys)::

    serve run kokoro_tvm_ext.serve.ray_deployment:app_builder artifact=/path/to/artifact num_replicas=4
    serve run kokoro_tvm_ext.serve.ray_deployment:app_builder artifact=/path/to/artifact \\
        min_replicas=1 max_replicas=8 target_ongoing_requests=2

or from Python: ``serve.run(build_app("/path/to/artifact", num_replicas=2))``. Every
node that may host a replica needs this package and the artifact at that path.

The replicas take the bounds, allowed hosts and API keys of `kokoro-tvm serve`, built by the same
``options.guard_config``: ``host`` is where Ray's proxy listens (its ``http_options.host``), which
defaults the allowed hosts and warns, as `kokoro-tvm serve` does, when it is beyond loopback and no
key is given. Keys come from ``api_key_file`` (or ``api_keys``) and ``KOKORO_TVM_API_KEYS``, read
where the application is built, and reach the replicas inside it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kokoro_tvm_ext.serve import options
from kokoro_tvm_ext.serve.options import GuardConfig
from kokoro_tvm_ext.speech import Speaker
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError

# The listener's bounds: Ray Serve's proxy holds the connections (its http_options), not the replicas.
LISTENER_BOUNDS = ("max_connections", "header_timeout")


def _serve():
    try:
        from ray import serve
    except ImportError:
        raise MissingAssetError("the Ray Serve deployment needs Ray: pip install 'kokoro-tvm-ext[ray]'") from None
    return serve


def _asgi_builder(config: SpeakerConfig, max_batch: int, guard: GuardConfig, max_input_chars: int, docs: bool):
    """Called on each replica when it starts: open the Speaker, warm it up, build the app. ``config`` holds its
    lexicon read (a ``Lexicon`` pickles), so the replicas need no copy of its file."""

    def build():
        from kokoro_tvm_ext.serve.app import create_app
        from kokoro_tvm_ext.serve.plan import Limits

        speaker = Speaker.open(config)
        speaker.warm_up()
        limits = Limits(max_input_chars=max_input_chars, max_tokens=speaker.max_tokens)
        return create_app(speaker, limits=limits, guard=guard, max_batch=max_batch, docs=docs)

    return build


def build_app(
    artifact: str,
    *,
    num_replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    target_ongoing_requests: float = 2.0,
    threads: int = 1,
    max_batch: int = 4,
    max_ongoing_requests: int = 16,
    lexicon: str | None = None,
    host: str = "127.0.0.1",
    allowed_hosts: str | Sequence[str] | None = None,
    api_keys: Sequence[str] = (),
    api_key_file: str | None = None,
    max_input_chars: int = 10_000,
    docs: bool = False,
    **bounds,
):
    """A Ray Serve application: ``num_replicas`` fixed replicas, or autoscaling between
    ``min_replicas`` and ``max_replicas`` aiming at ``target_ongoing_requests`` per replica.
    Each replica reserves ``threads`` CPUs and runs the model on that many threads. ``lexicon``: a
    lexicon file (docs/pronunciation.md), read here, so a bad line fails the deployment before any replica.

    As `kokoro-tvm serve`'s flags of the same names: ``host`` (where Ray's proxy listens), ``allowed_hosts``,
    ``api_keys`` and ``api_key_file``, ``max_input_chars``, ``docs`` and the request bounds in ``bounds``
    (``max_body_bytes``, ``max_requests``, ``max_client_requests``, ``request_timeout``, ``body_timeout``),
    which apply per replica."""
    listener = sorted(set(bounds) & set(LISTENER_BOUNDS))
    if listener:
        raise InvalidInputError(
            f"{', '.join(listener)}: Ray Serve's proxy holds the connections, not the replicas; set its "
            "limits in Ray's http_options (keep_alive_timeout_s, request_timeout_s)"
        )
    guard = options.guard_config(
        host=host,
        allowed_hosts=allowed_hosts,
        api_keys=api_keys,
        api_key_files=[api_key_file] if api_key_file else (),
        **bounds,
    )
    options.check_count("max_input_chars", max_input_chars)
    serve = _serve()
    config = SpeakerConfig(artifact=artifact, threads=threads, lexicon=lexicon).with_lexicon_read()
    if num_replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise InvalidInputError("give num_replicas or min_replicas/max_replicas, not both")
    config.check()
    settings = {"ray_actor_options": {"num_cpus": threads}, "max_ongoing_requests": max_ongoing_requests}
    if min_replicas is not None or max_replicas is not None:
        low = 1 if min_replicas is None else min_replicas
        high = max(low, 1) if max_replicas is None else max_replicas
        if not 0 <= low <= high or high < 1:
            raise InvalidInputError(f"need 0 <= min_replicas <= max_replicas and max_replicas >= 1, got {low}, {high}")
        settings["autoscaling_config"] = {
            "min_replicas": low,
            "max_replicas": high,
            "target_ongoing_requests": target_ongoing_requests,
        }
    else:
        settings["num_replicas"] = 1 if num_replicas is None else num_replicas
    warning = options.exposure_warning(guard, host, "api_key_file=FILE")
    if warning:
        print(f"kokoro-tvm Ray Serve deployment: {warning}", file=sys.stderr)

    @serve.deployment(name="kokoro-tvm", **settings)
    @serve.ingress(_asgi_builder(config, max_batch, guard, max_input_chars, docs))
    class KokoroSpeech:
        pass

    return KokoroSpeech.bind()


# app_builder's keys by type (LISTENER_BOUNDS among them, so build_app refuses them with the reason).
INTS = ("num_replicas", "min_replicas", "max_replicas", "threads", "max_batch", "max_ongoing_requests")
INTS += ("max_input_chars", "max_body_bytes", "max_requests", "max_client_requests", "max_connections")
FLOATS = ("target_ongoing_requests", "request_timeout", "body_timeout", "header_timeout")
TEXTS = ("lexicon", "host", "allowed_hosts", "api_key_file")


def _parsed(key: str, text: str):
    if key == "docs":
        if text.lower() not in ("true", "false", "1", "0"):
            raise InvalidInputError(f"docs={text!r} must be true or false")
        return text.lower() in ("true", "1")
    kind, what = (int, "a whole number") if key in INTS else (float, "a number")
    try:
        return kind(text)
    except ValueError:
        raise InvalidInputError(f"{key}={text!r} must be {what}") from None


def app_builder(args: dict):
    """``serve run kokoro_tvm_ext.serve.ray_deployment:app_builder key=value ...`` (values arrive as text)."""
    if "artifact" not in args:
        raise InvalidInputError("give artifact=DIR: a compiled artifact present on every node")
    known = {"artifact", "api_key", "docs", *INTS, *FLOATS, *TEXTS}
    unknown = set(args) - known
    if unknown:
        raise InvalidInputError(f"unknown argument(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    kwargs = {k: _parsed(k, v) for k, v in args.items() if k in (*INTS, *FLOATS, "docs")}
    kwargs.update({k: v for k, v in args.items() if k in TEXTS})
    if "api_key" in args:
        kwargs["api_keys"] = [args["api_key"]]
    return build_app(args["artifact"], **kwargs)
