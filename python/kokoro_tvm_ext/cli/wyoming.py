"""Speak for Home Assistant over the Wyoming protocol (its voice assistants' text-to-speech).

Starts on the cached artifact (compiling it on the first start), warms the model up, then
answers Wyoming clients: `describe` lists every voice with its language, `synthesize` streams
16-bit 24 kHz mono PCM sentence by sentence, and the streaming events (synthesize-start /
-chunk / -stop) speak each sentence as soon as its text has arrived. Requests share one model
through the same chunk scheduler as `kokoro-tvm serve`.

In Home Assistant: Settings > Devices & services > Add integration > Wyoming Protocol, with this
machine's address and the port. Listening beyond this machine: --uri tcp://0.0.0.0:10200 (the
protocol has no authentication; keep it on a trusted network). Every connection is bounded: its text
(--max-input-chars), its idle time (--idle-timeout), its request's time (--synthesis-timeout), the events
that add nothing (--max-ignored-events), and the connections at once (--max-clients). See docs/wyoming.md.

Examples:
  kokoro-tvm wyoming                                   # tcp://127.0.0.1:10200
  kokoro-tvm wyoming --uri tcp://0.0.0.0:10200 --voice bf_emma --threads 2
  kokoro-tvm wyoming --uri unix:///run/kokoro/wyoming.sock --speed 1.1"""

from __future__ import annotations

import asyncio
import logging
import sys

from kokoro_tvm_ext.cli.options import (
    VOICE_HELP,
    add_log_level_argument,
    add_model_arguments,
    add_scheduler_arguments,
    check_scheduler_arguments,
    speaker_config,
)
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS, WYOMING_URI, check_count, check_seconds
from kokoro_tvm_ext.serve.scheduler import CHUNKS_AHEAD, Scheduler
from kokoro_tvm_ext.speech import DEFAULT_VOICE, Speaker
from kokoro_tvm_ext.speech.speaker import MAX_SPEED, MIN_SPEED
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError


def add_arguments(parser) -> None:
    parser.add_argument(
        "--uri",
        default=WYOMING_URI,
        help="where to listen: tcp://HOST:PORT or unix://PATH (default: %(default)s)",
    )
    add_model_arguments(parser, threads_help="threads for the model")

    parser.add_argument(
        "--voice",
        default=DEFAULT_VOICE,
        help="the voice of a request that names none; a request naming only a language gets this voice if it "
        "speaks it, else the first voice of that language. " + VOICE_HELP,
    )
    parser.add_argument(
        "--speed", type=float, default=1.0, help="speaking rate of every request, 0.1 to 10 (default: %(default)s)"
    )
    parser.add_argument(
        "--max-input-chars",
        type=int,
        default=MAX_INPUT_CHARS,
        metavar="N",
        help="longest text of one request, streamed or not; longer gets an error event (default: %(default)s)",
    )
    parser.add_argument(
        "--max-clients",
        type=int,
        default=16,
        metavar="N",
        help="connections at once; one more gets an error event and is closed (default: %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="a client that sends no event for SECONDS while the server waits for one (or reads no answer, with "
        "nothing being spoken) gets an error event and is disconnected, so idle connections cannot hold every "
        "--max-clients slot (default: %(default)g)",
    )
    parser.add_argument(
        "--synthesis-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="a request's deadline: SECONDS from its synthesize (or synthesize-start) plus the length of the audio "
        "sent, so a client playing it in real time is never cut. Past it, its synthesis stops and the client gets "
        "an error event and is disconnected (default: %(default)g)",
    )
    parser.add_argument(
        "--max-ignored-events",
        type=int,
        default=1000,
        metavar="N",
        help="events that add nothing (an empty synthesize-chunk, an event this server ignores) a client may send "
        "between two requests that speak; one more gets an error event and the client is disconnected "
        "(default: %(default)s)",
    )
    add_scheduler_arguments(parser)
    add_log_level_argument(parser, "info also logs each refused request")


def _check(args):

    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise InvalidInputError(f"--speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, got {args.speed}")
    for flag in ("max_input_chars", "max_clients", "max_ignored_events"):
        check_count(flag, getattr(args, flag), as_flags=True)
    for flag in ("idle_timeout", "synthesis_timeout"):
        check_seconds(flag, getattr(args, flag), as_flags=True)
    check_scheduler_arguments(args)
    return speaker_config(args)


def import_wyoming():
    """``kokoro_tvm_ext.serve.wyoming``, or a MissingAssetError naming the extra to install."""
    try:
        from kokoro_tvm_ext.serve import wyoming
    except ImportError as err:
        raise MissingAssetError(
            f"the Wyoming server needs the {err.name or 'wyoming'} package: pip install 'kokoro-tvm-ext[wyoming]'"
        ) from None
    return wyoming


def run(args) -> int:
    config = _check(args)
    wyoming = import_wyoming()

    sock = wyoming.listen(args.uri)  # before the model loads: a bad URI or a busy port fails at once
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print("kokoro-tvm wyoming: loading the model", file=sys.stderr)
    speaker = Speaker.open(config)
    speaker.warm_up()
    wyoming_config = wyoming.WyomingConfig(
        voice=args.voice,
        speed=args.speed,
        max_input_chars=args.max_input_chars,
        max_clients=args.max_clients,
        first_chunk_tokens=args.first_chunk_tokens,
        idle_timeout=args.idle_timeout,
        synthesis_timeout=args.synthesis_timeout,
        max_ignored_events=args.max_ignored_events,
    )
    scheduler = Scheduler(speaker, max_batch=args.max_batch, ahead=CHUNKS_AHEAD)
    service = wyoming.WyomingService(speaker, scheduler, wyoming_config)
    print(f"kokoro-tvm wyoming: listening on {wyoming.address_of(sock)}", file=sys.stderr, flush=True)
    try:
        asyncio.run(service.serve(sock))
    except KeyboardInterrupt:
        print("kokoro-tvm wyoming: stopped", file=sys.stderr)
    finally:
        scheduler.stop()
    return 0
