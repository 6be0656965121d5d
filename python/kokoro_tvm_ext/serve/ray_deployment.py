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
"""

from __future__ import annotations

from kokoro_tvm_ext.speech import Speaker
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError


def _serve():
    try:
        from ray import serve
    except ImportError:
        raise MissingAssetError("the Ray Serve deployment needs Ray: pip install 'kokoro-tvm-ext[ray]'") from None
    return serve


def _asgi_builder(config: SpeakerConfig, max_batch: int):
    """Called on each replica when it starts: open the Speaker, warm it up, build the app. ``config`` holds its
    lexicon read (a ``Lexicon`` pickles), so the replicas need no copy of its file."""

    def build():
        from kokoro_tvm_ext.serve.app import create_app

        speaker = Speaker.open(config)
        speaker.warm_up()
        return create_app(speaker, max_batch=max_batch)

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
):
    """A Ray Serve application: ``num_replicas`` fixed replicas, or autoscaling between
    ``min_replicas`` and ``max_replicas`` aiming at ``target_ongoing_requests`` per replica.
    Each replica reserves ``threads`` CPUs and runs the model on that many threads. ``lexicon``: a
    lexicon file (docs/pronunciation.md), read here, so a bad line fails the deployment before any replica."""
    serve = _serve()
    config = SpeakerConfig(artifact=artifact, threads=threads, lexicon=lexicon).with_lexicon_read()
    if num_replicas is not None and (min_replicas is not None or max_replicas is not None):
        raise InvalidInputError("give num_replicas or min_replicas/max_replicas, not both")
    config.check()
    options = {"ray_actor_options": {"num_cpus": threads}, "max_ongoing_requests": max_ongoing_requests}
    if min_replicas is not None or max_replicas is not None:
        low = 1 if min_replicas is None else min_replicas
        high = max(low, 1) if max_replicas is None else max_replicas
        if not 0 <= low <= high or high < 1:
            raise InvalidInputError(f"need 0 <= min_replicas <= max_replicas and max_replicas >= 1, got {low}, {high}")
        options["autoscaling_config"] = {
            "min_replicas": low,
            "max_replicas": high,
            "target_ongoing_requests": target_ongoing_requests,
        }
    else:
        options["num_replicas"] = 1 if num_replicas is None else num_replicas

    @serve.deployment(name="kokoro-tvm", **options)
    @serve.ingress(_asgi_builder(config, max_batch))
    class KokoroSpeech:
        pass

    return KokoroSpeech.bind()


def app_builder(args: dict):
    """``serve run kokoro_tvm_ext.serve.ray_deployment:app_builder key=value ...`` (values arrive as text)."""
    if "artifact" not in args:
        raise InvalidInputError("give artifact=DIR: a compiled artifact present on every node")
    ints = ("num_replicas", "min_replicas", "max_replicas", "threads", "max_batch", "max_ongoing_requests")
    unknown = set(args) - {"artifact", "target_ongoing_requests", "lexicon", *ints}
    if unknown:
        raise InvalidInputError(f"unknown argument(s) {', '.join(sorted(unknown))}")
    kwargs = {k: int(args[k]) for k in ints if k in args}
    if "target_ongoing_requests" in args:
        kwargs["target_ongoing_requests"] = float(args["target_ongoing_requests"])
    return build_app(args["artifact"], lexicon=args.get("lexicon"), **kwargs)
