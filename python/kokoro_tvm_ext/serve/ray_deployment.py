"""The speech server (``serve/app.py``) as a Ray Serve deployment, for many replicas on a cluster.

Each replica is one copy of the server's ASGI app with its own loaded artifact and
scheduler; Ray Serve's proxy spreads requests over the replicas and, with
autoscaling, adds or removes replicas by the number of requests in flight. Run it
with Ray's CLI (the arguments are this module's ``app_builder`` keys)::

    serve run kokoro_tvm_ext.serve.ray_deployment:app_builder artifact=/path/to/artifact num_replicas=4
    serve run kokoro_tvm_ext.serve.ray_deployment:app_builder artifact=/path/to/artifact \\
        min_replicas=1 max_replicas=8 target_ongoing_requests=2

or from Python: ``serve.run(build_app("/path/to/artifact", num_replicas=2))``. Every
node that may host a replica needs this package and the artifact at that path (without ``artifact``, the
cached one for ``weights`` and ``precision``, found or compiled where the application is built).

The replicas take every option of `kokoro-tvm serve` by its name, checked by the same builder
(``server.server``), but those of the listener, which Ray's proxy holds (``NOT_HERE`` says where each goes):
``host`` is where Ray's proxy listens (its ``http_options.host``), which defaults the allowed hosts and warns,
as `kokoro-tvm serve` does, when it is beyond loopback and no key is given. Keys come from ``api_key_file`` (or
``api_key``) and ``KOKORO_TVM_API_KEYS``, read where the application is built, and reach the replicas inside it,
as the lexicon and the voice aliases do.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from inspect import signature
from pathlib import Path

from kokoro_tvm_ext.serve import server
from kokoro_tvm_ext.serve.options import BOUNDS, GuardConfig
from kokoro_tvm_ext.speech import SpeakerConfig
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError

PROXY = (
    "Ray Serve's proxy holds the connections, not the replicas; set its limits in Ray's http_options "
    "(keep_alive_timeout_s, request_timeout_s)"
)
WYOMING = "Ray's proxy carries HTTP only: run `kokoro-tvm wyoming` beside the deployment"
# `kokoro-tvm serve`'s flags the deployment does not take, and where each goes instead; it takes every other one.
NOT_HERE = {
    "port": "Ray's proxy listens on its http_options port",
    "log_level": "Ray's logging_config sets the replicas' logging",
    "max_connections": PROXY,
    "header_timeout": PROXY,
    "wyoming": WYOMING,
    "wyoming_idle_timeout": WYOMING,
}


def _serve():
    try:
        from ray import serve
    except ImportError:
        raise MissingAssetError("the Ray Serve deployment needs Ray: pip install 'kokoro-tvm-ext[ray]'") from None
    return serve


def build_app(
    artifact: str | None = None,
    *,
    num_replicas: int | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    target_ongoing_requests: float = 2.0,
    max_ongoing_requests: int = 16,
    threads: int = 1,
    weights: str | None = None,
    precision: str = "fp32",
    lexicon: str | None = None,
    backend: str = "tvm",
    **options,
):
    """A Ray Serve application: ``num_replicas`` fixed replicas, or autoscaling between
    ``min_replicas`` and ``max_replicas`` aiming at ``target_ongoing_requests`` per replica.
    Each replica reserves ``threads`` CPUs and runs the model on that many threads. ``lexicon``: a
    lexicon file (docs/pronunciation.md), read here, so a bad line fails the deployment before any replica.

    ``options``: `kokoro-tvm serve`'s flags of the same names (``server.OPTIONS``: ``host``, where Ray's proxy
    listens, ``allowed_hosts``, ``api_key``, ``api_key_file``, ``voice_alias``, ``max_batch``,
    ``first_chunk_tokens``, ``docs``, the request bounds, ...), which apply per replica; those of ``NOT_HERE`` are
    refused with where they go."""
    elsewhere = sorted(set(options) & set(NOT_HERE))
    if elsewhere:
        raise InvalidInputError("; ".join(f"{name}: {NOT_HERE[name]}" for name in elsewhere))
    unknown = sorted(set(options) - set(server.OPTIONS))
    if unknown:
        raise InvalidInputError(f"unknown option(s) {', '.join(unknown)}")
    model = SpeakerConfig(
        artifact=Path(artifact).expanduser() if artifact else None,
        weights=weights,
        precision=precision,
        threads=threads,
        lexicon=lexicon,
        backend=backend,
    )
    built = server.server(model, **options)
    if num_replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise InvalidInputError("give num_replicas or min_replicas/max_replicas, not both")
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
    serve = _serve()
    if artifact is None and backend == "tvm":  # the replicas open the one found (or compiled) here
        built = replace(built, speaker=built.speaker.resolved())
    warning = built.exposure_warning("api_key_file=FILE")
    if warning:
        print(f"kokoro-tvm Ray Serve deployment: {warning}", file=sys.stderr)

    def replica_app():
        """Each replica, when it starts, opens the Speaker, warms it up and builds the app. A plain function:
        Ray takes a bound method (``built.app``) for an ASGI app itself and calls it per request."""
        return built.app()

    @serve.deployment(name="kokoro-tvm", **settings)
    @serve.ingress(replica_app)
    class KokoroSpeech:
        pass

    return KokoroSpeech.bind()


def _defaults(function) -> dict:
    return {name: p.default for name, p in signature(function).parameters.items() if p.default is not p.empty}


# What app_builder's text values become, by the type of each key's default (build_app's, server.server's and
# GuardConfig's); the keys whose default is None name theirs here.
DEFAULTS = {**_defaults(build_app), **_defaults(server.server), **{name: getattr(GuardConfig, name) for name in BOUNDS}}
WHOLE_NUMBERS = ("num_replicas", "min_replicas", "max_replicas")
KEYS = {"artifact", *DEFAULTS, *server.OPTIONS, *NOT_HERE} - {"as_flags", "options"}


def _parsed(key: str, text: str):
    default = 0 if key in WHOLE_NUMBERS else DEFAULTS.get(key)
    if isinstance(default, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise InvalidInputError(f"{key}={text!r} must be true or false")
        return text.lower() in ("true", "1")
    if isinstance(default, tuple):  # a repeatable flag: one value here
        return (text,)
    if not isinstance(default, (int, float)):
        return text
    kind, what = (int, "a whole number") if isinstance(default, int) else (float, "a number")
    try:
        return kind(text)
    except ValueError:
        raise InvalidInputError(f"{key}={text!r} must be {what}") from None


def app_builder(args: dict):
    """``serve run kokoro_tvm_ext.serve.ray_deployment:app_builder key=value ...`` (values arrive as text; a
    repeatable option takes one value)."""
    unknown = set(args) - KEYS
    if unknown:
        raise InvalidInputError(f"unknown argument(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(KEYS))}")
    return build_app(**{key: _parsed(key, text) for key, text in args.items()})
