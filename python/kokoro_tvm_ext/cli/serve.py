"""Serve speech over HTTP: OpenAI's /v1/audio/speech plus Kokoro-FastAPI's extensions.

Starts on the cached artifact (compiling it on the first start), warms the model up,
then answers requests on one model shared by a chunk-level scheduler. Endpoints:
POST /v1/audio/speech (stream_format "sse" for OpenAI's server-sent events; volume_multiplier),
POST /dev/captioned_speech, POST /dev/phonemize, POST /dev/generate_from_phonemes,
GET /v1/audio/voices (with the aliases), GET /v1/models, GET /health (200 once it can synthesize),
GET /metrics (Prometheus), and a page to try the voices at /web. --wyoming URI also speaks Home
Assistant's Wyoming protocol on the same model (see `kokoro-tvm wyoming --help`).

API keys: --api-key KEY (repeatable), --api-key-file FILE (one a line, '#' comments) or the environment
variable KOKORO_TVM_API_KEYS (comma-separated); then every route but /health, /metrics and /web needs
'Authorization: Bearer KEY' (401 otherwise). Prefer the file or the variable: flags show in `ps`.
OpenAI's voice names (alloy, ash, ballad, coral, echo, fable, nova, onyx, sage, shimmer, verse, marin,
cedar) are aliases of Kokoro voices; --voice-alias NAME=VOICE adds or changes one.

Every connection and request is bounded: the connections open (--max-connections: 503 beyond),
the time to send a request's headers and its body (--header-timeout, --body-timeout: 408), its
body (--max-body-bytes; none on routes that take none), the requests in flight per client (an IPv4
address or an IPv6 /64) and in all (--max-client-requests, --max-requests: 429 beyond), its time
(--request-timeout: 504, or the stream is cut), and the Host it names (--allowed-hosts: loopback
names by default, against DNS rebinding). Streams are paced by their clients: synthesis runs at
most two chunks ahead of what a client has read. FastAPI's /docs, /redoc and /openapi.json are
off unless --docs. Exposing the server beyond this machine: see docs/server.md.

Examples:
  kokoro-tvm serve                                   # http://127.0.0.1:8880
  kokoro-tvm serve --host 0.0.0.0 --allowed-hosts tts.lan,192.168.1.5 --threads 2 --api-key-file keys.txt
  kokoro-tvm serve --voice-alias alloy=af_heart --voice-alias narrator=bm_george:0.7,bf_emma:0.3
  kokoro-tvm serve --wyoming tcp://0.0.0.0:10200      # and Home Assistant's Wyoming on port 10200
  curl -s localhost:8880/v1/audio/speech -H 'Content-Type: application/json' \\
       -d '{"input": "Hello there.", "response_format": "wav"}' -o hello.wav"""

from __future__ import annotations

import sys

from kokoro_tvm_ext.cli.options import (
    add_log_level_argument,
    add_model_arguments,
    add_scheduler_arguments,
    model_config,
)
from kokoro_tvm_ext.cli.wyoming import import_wyoming
from kokoro_tvm_ext.serve import options, server
from kokoro_tvm_ext.serve.auth import KEYS_ENV
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS, GuardConfig
from kokoro_tvm_ext.speech.config import BACKENDS
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError


def add_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8880, help="port (default: %(default)s)")
    add_model_arguments(parser, threads_help="threads for the model")
    parser.add_argument(
        "--max-input-chars",
        type=int,
        default=MAX_INPUT_CHARS,
        metavar="N",
        help="longest input accepted; longer gets 413 (default: %(default)s)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="tvm",
        help="tvm: the compiled artifact; torch: PyTorch eager KModel, for comparison (default: %(default)s)",
    )
    add_scheduler_arguments(parser)
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=GuardConfig.max_body_bytes,
        metavar="N",
        help="largest request body; larger is refused with 413 before it is read (on its Content-Length, "
        "or as soon as that many bytes arrived). The longest input fits in far less even with every "
        "character \\u-escaped (default: %(default)s = 1 MiB)",
    )
    parser.add_argument(
        "--max-client-requests",
        type=int,
        default=GuardConfig.max_client_requests,
        metavar="N",
        help="speech requests in flight at once from one client, an IPv4 address or an IPv6 /64 (until its "
        "response is complete); more get 429 rate_limit_exceeded with Retry-After. Behind a reverse proxy on "
        "this machine, the address comes from its X-Forwarded-For (default: %(default)s)",
    )
    parser.add_argument(
        "--max-requests",
        type=int,
        default=GuardConfig.max_requests,
        metavar="N",
        help="speech requests in flight at once from all clients; more get 429 (default: %(default)s)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=GuardConfig.request_timeout,
        metavar="SECONDS",
        help="a request's deadline: SECONDS from its arrival plus the length of the audio sent so far, so a "
        "client playing the stream in real time is never cut. Past it, planning stops and queued chunks "
        "are dropped; the answer is 504, or a started stream is cut (default: %(default)g)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=GuardConfig.body_timeout,
        metavar="SECONDS",
        help="time for a request's whole body to arrive once its headers have; past it, 408 and the "
        "connection is closed, its in-flight slot freed (default: %(default)g)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=GuardConfig.header_timeout,
        metavar="SECONDS",
        help="time for a request's whole headers to arrive, from the connection's opening or its previous "
        "response; past it the connection is closed (408 if a request had begun). Headers over 64 KiB or "
        "128 lines get 431 (default: %(default)g)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=GuardConfig.max_connections,
        metavar="N",
        help="connections open at once, idle or not; more are answered 503 and closed at once. Keep it "
        "under the process's open-file limit (ulimit -n) (default: %(default)s)",
    )
    parser.add_argument(
        "--allowed-hosts",
        metavar="HOSTS",
        help="comma-separated names and addresses clients may put in the Host header ('*.example.com' "
        "for subdomains, '*' for any); other requests get 400. This stops DNS rebinding: a web page "
        "reaching this server through a browser under its own name. Default: localhost, 127.0.0.1, "
        "::1, and --host if it is one specific address",
    )
    parser.add_argument(
        "--api-key",
        action="append",
        metavar="KEY",
        help="a key clients must send as 'Authorization: Bearer KEY' (repeatable; any one is accepted). "
        "/health, /metrics and /web stay open. Default: no key, unless --api-key-file or "
        f"{KEYS_ENV} (comma-separated) gives some",
    )
    parser.add_argument(
        "--api-key-file",
        action="append",
        metavar="FILE",
        help="keys, one a line ('#' starts a comment); repeatable. Keeps keys out of `ps`",
    )
    parser.add_argument(
        "--voice-alias",
        action="append",
        metavar="NAME=VOICE",
        help="answer the voice NAME with VOICE (a voice or a blend such as af_heart:0.6,am_adam:0.4); "
        "repeatable. OpenAI's voice names are aliases by default (GET /v1/audio/voices lists them)",
    )
    parser.add_argument(
        "--voice-aliases",
        action="append",
        metavar="FILE",
        help="aliases from FILE, one NAME=VOICE a line ('#' comments); --voice-alias wins over it",
    )
    parser.add_argument(
        "--voices-dir",
        action="append",
        metavar="DIR",
        help="also serve the voice files in DIR (NAME.npy with NAME.json, as `kokoro-tvm voices design` writes "
        "them) by NAME, listed in GET /v1/audio/voices; repeatable ($KOKORO_TVM_VOICES is read too)",
    )
    parser.add_argument(
        "--wyoming",
        metavar="URI",
        help="also speak Home Assistant's Wyoming protocol on URI (tcp://HOST:PORT or unix://PATH; see "
        "`kokoro-tvm wyoming`), on the same model. Wyoming has no keys: keep it on a trusted network. Its "
        "requests take --max-input-chars and --request-timeout (from a request's start, plus its audio sent)",
    )
    parser.add_argument(
        "--wyoming-idle-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="a Wyoming client that sends no event for SECONDS while the server waits for one (or reads no "
        "answer, with nothing being spoken) is disconnected, so idle connections cannot hold every slot "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--no-voice-tags",
        action="store_true",
        help="read [voice:] and [rate:] tags as text and refuse POST /dev/dialogue (docs/markup.md)",
    )
    parser.add_argument(
        "--docs",
        action="store_true",
        help="serve FastAPI's /docs, /redoc and /openapi.json (off by default: /docs and /redoc load scripts "
        "from a CDN into the origin of the /web page, which keeps the API key)",
    )
    add_log_level_argument(parser, "uvicorn's log level")


def _server(args):
    """The checked server: every flag of ``server.OPTIONS`` by its name (the rest are the listener's)."""
    return server.server(model_config(args), as_flags=True, **{name: getattr(args, name) for name in server.OPTIONS})


def run(args) -> int:
    if not 0 <= args.port <= 65535:
        raise InvalidInputError(f"--port must be 0..65535, got {args.port}")
    options.check_seconds("wyoming_idle_timeout", args.wyoming_idle_timeout, as_flags=True)
    built = _server(args)
    try:
        import av  # noqa: F401
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise MissingAssetError(f"serving needs {err.name}: pip install 'kokoro-tvm-ext[serve]'") from None

    from kokoro_tvm_ext.serve import listen

    guard = built.guard
    warning = built.exposure_warning("--api-key-file FILE (or --api-key)")
    if warning:
        print(f"kokoro-tvm serve: {warning}", file=sys.stderr)
    wyoming = wyoming_socket = None
    if args.wyoming:
        wyoming = import_wyoming()
        wyoming_socket = wyoming.listen(args.wyoming, "--wyoming")  # before the model loads: fails at once
    print(f"kokoro-tvm serve: loading the {args.backend} backend", file=sys.stderr)
    app = built.app()
    print(f"kokoro-tvm serve: listening on http://{args.host}:{args.port}", file=sys.stderr)
    wyoming_thread = None
    if wyoming is not None:
        wyoming_thread = wyoming.start_in_thread(built.wyoming_beside(app, args.wyoming_idle_timeout), wyoming_socket)
        print(f"kokoro-tvm serve: Wyoming on {wyoming.address_of(wyoming_socket)}", file=sys.stderr)
    if "*" not in guard.allowed_hosts:
        print(f"kokoro-tvm serve: answering requests for hosts {', '.join(guard.allowed_hosts)}", file=sys.stderr)
    if guard.api_keys:
        count = len(guard.api_keys)
        print(f"kokoro-tvm serve: {count} API key{'s' if count > 1 else ''}; requests need one", file=sys.stderr)
    try:
        listen.run(app, host=args.host, port=args.port, log_level=args.log_level, bounds=guard)
    finally:
        if wyoming_thread is not None:
            wyoming_thread.stop()
    return 0
