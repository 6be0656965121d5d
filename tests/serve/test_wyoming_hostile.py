"""A Wyoming server against hostile clients, over real loopback sockets: streams that cost work, events that do
nothing, malformed events, idle clients and requests past their deadline.

The sentence splitter's work is counted (``SentenceBuffer.work``, summed by the server in ``stats``), so the
tests assert work, not time. The in-process servers run ``start_in_thread`` (what `serve --wyoming` runs) on a
stand-in Speaker (tests/serve/fakes.py); the malformed events and the idle timeout are also sent to a real
`kokoro-tvm wyoming` process on the small artifact, whose log must hold one line per refusal and no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import socket
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("wyoming")

from conftest import running_wyoming  # noqa: E402
from fakes import FakeSpeaker  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.event import Event, async_read_event, write_event  # noqa: E402
from wyoming.info import Describe  # noqa: E402
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop  # noqa: E402

from kokoro_tvm_ext.cli import main  # noqa: E402
from kokoro_tvm_ext.serve.scheduler import Scheduler  # noqa: E402
from kokoro_tvm_ext.serve.wyoming import WyomingConfig, WyomingService, listen, start_in_thread  # noqa: E402
from kokoro_tvm_ext.speech.sentences import SentenceBuffer, split_sentences  # noqa: E402

# Streams of pieces that never complete a sentence, each once quadratic: the pieces reread the text so far.
HOSTILE_STREAMS = {
    "unclosed [ then empty pieces": ("[" + ". " * 4999, "", 10_000),
    "unclosed [ then (": ("[" + ". " * 4999, "(", 10_000),
    "unclosed [ then /": ("[" + "x" * 9_999, "/", 10_000),
    "spaced closers after a mark": ("Hi.", " »", 5_000),
    "closers after spaces": ("Hi", " )", 5_000),
    "newlines before closers": ("Hi", "\n »", 3_000),
    "an override's phonemes one by one": ("[a](/", "b", 10_000),
}
WORK_PER_CHAR = 12  # the splitter's searches read each character a bounded number of times (measured: < 9)


def wire(event: Event) -> bytes:
    """An event as the `wyoming` package writes it."""
    buffer = io.BytesIO()
    write_event(event, buffer)
    return buffer.getvalue()


# -- the splitter alone ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", HOSTILE_STREAMS)
def test_the_sentence_splitter_reads_each_character_a_bounded_number_of_times(name):
    first, piece, count = HOSTILE_STREAMS[name]
    buffer = SentenceBuffer("a")
    given = [buffer.add(first)] + [buffer.add(piece) for _ in range(count)] + [buffer.rest()]
    text = first + piece * count
    assert buffer.work <= WORK_PER_CHAR * len(text) + 100, (buffer.work, len(text))
    # And still cut as the whole text is.
    assert [s for g in given if g for s in split_sentences(g)] == split_sentences(text)


@pytest.mark.parametrize(
    "text",
    [
        "a" + " " * 10_000 + "b",  # the trailing run found from the back, not tried at each of its spaces
        "a b" + "\n" * 10_000,  # a blank line at the end, not proved: read once
        "a" + "\u2028\n" * 5_000 + "b",
        "Hi." + " »" * 5_000 + " Then",  # more closers than a sentence has: read once
    ],
)
def test_splitting_whole_text_is_linear_too(text):
    """What every front end plans with (HTTP, `say`, a Wyoming synthesize): these took 0.2-0.3 s of CPU for
    10,000 characters, quadratic; now about a millisecond. The bound has a 50x margin."""
    best = min(_cpu_seconds(split_sentences, text) for _ in range(3))
    assert best < 0.05, best
    assert "".join(split_sentences(text)) == text


def _cpu_seconds(fn, *args) -> float:
    start = time.thread_time()
    fn(*args)
    return time.thread_time() - start


# -- a server in this process, on a stand-in Speaker ------------------------------------------------------------
class Speaker(FakeSpeaker):
    """The stand-in with voices as the Speaker gives them (a language each)."""

    def voice(self, voice, lang=None):
        return SimpleNamespace(spec=voice, lang="a")


@contextlib.contextmanager
def wyoming_in_process(chunk_seconds: float = 0.1, **config):
    """``(address, service, scheduler, speaker)`` of a Wyoming server in a thread on a free loopback port."""
    speaker = Speaker(chunk_seconds=chunk_seconds)
    scheduler = Scheduler(speaker, ahead=2)
    sock = listen("tcp://127.0.0.1:0")
    address = ("127.0.0.1", sock.getsockname()[1])
    service = WyomingService(speaker, scheduler, WyomingConfig(**config))
    handle = start_in_thread(service, sock)
    try:
        yield address, service, scheduler, speaker
    finally:
        speaker.release.set()
        handle.stop()
        scheduler.stop()


def wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def settled(read, quiet: float = 1.0, timeout: float = 60.0):
    """``read()`` once it has not changed for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"still changing: {value}"
        time.sleep(0.05)
        if (now := read()) != value:
            value, since = now, time.monotonic()
    return value


def read_events(sock: socket.socket, timeout: float = 30.0) -> list[Event]:
    """Every event the server sends until it closes the connection."""

    async def read_all(data: bytes) -> list[Event]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        events = []
        while (event := await async_read_event(reader)) is not None:
            events.append(event)
        return events

    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return asyncio.run(read_all(data))


@pytest.mark.parametrize("name", ["unclosed [ then empty pieces", "unclosed [ then (", "spaced closers after a mark"])
def test_a_hostile_stream_costs_work_linear_in_the_bytes_sent(name):
    """The issue's stream: `"[" + ". " * 4999`, then 10,000 pieces that complete nothing. The server's work on
    the text (the splitter's, counted) stays within a small factor of the text sent, and nothing is planned."""
    first, piece, count = HOSTILE_STREAMS[name]
    with wyoming_in_process(max_input_chars=50_000, max_ignored_events=20_000) as (address, service, scheduler, _):
        blob = wire(SynthesizeStart().event()) + wire(SynthesizeChunk(first).event())
        blob += wire(SynthesizeChunk(piece).event()) * count
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(blob)
            wait_for(lambda: service.stats["events"] == count + 2, "the events to be read")
        stats = service.stats.copy()
        sent_chars = len(first) + len(piece) * count
        assert stats["bytes"] == len(blob) and stats["text_chars"] == sent_chars
        assert stats["splitter_work"] <= WORK_PER_CHAR * sent_chars + 100, stats
        assert stats["ignored_events"] == (count if piece == "" else 0)
        assert scheduler.snapshot()["requests"] == 0  # no sentence was complete: nothing planned


def test_empty_chunks_past_the_limit_get_an_error_and_the_connection_closes():
    with wyoming_in_process() as (address, service, scheduler, _):  # the default limit, 1000
        limit = service.config.max_ignored_events
        blob = wire(SynthesizeStart().event()) + wire(SynthesizeChunk("[" + ". " * 4999).event())
        blob += wire(SynthesizeChunk("").event()) * (limit + 1)
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(blob)
            events = read_events(sock)  # the server closes the connection after its error
        assert [e.type for e in events] == ["error"], events
        assert events[0].data["code"] == "TooManyEvents" and f"at most {limit}" in events[0].data["text"]
        assert service.stats["closed_ignored"] == 1 and service.stats["ignored_events"] == limit + 1
        assert scheduler.snapshot()["requests"] == 0
        # Other events that add nothing count too: stops and chunks outside a stream, unknown types.
        blob = b"".join(wire(e) for e in (SynthesizeStop().event(), Event("not-a-type"), SynthesizeChunk("x").event()))
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(blob * (limit // 3 + 1))
            events = read_events(sock)
        assert [e.type for e in events] == ["error"] and events[0].data["code"] == "TooManyEvents"


def test_requests_that_speak_start_the_count_again():
    """A client between requests may send up to the limit each time (a stream's empty pieces, Home Assistant's
    copy of the text): the count starts again at each request that speaks."""
    with wyoming_in_process(max_ignored_events=5) as (address, service, scheduler, _):

        async def three_requests() -> list[str]:
            async with AsyncTcpClient(*address, read_timeout=30) as client:
                ends = []
                for _ in range(3):
                    for event in [SynthesizeStart().event(), *[SynthesizeChunk("").event()] * 4]:
                        await client.write_event(event)
                    await client.write_event(SynthesizeChunk("one two.").event())
                    await client.write_event(Synthesize("one two.").event())  # HA's copy: ignored, counted
                    await client.write_event(SynthesizeStop().event())
                    while (event := await client.read_event()).type not in ("synthesize-stopped", "error"):
                        pass
                    ends.append(event.type)
                return ends

        assert asyncio.run(three_requests()) == ["synthesize-stopped"] * 3
        assert service.stats["ignored_events"] == 15 and service.stats["closed_ignored"] == 0


def test_an_idle_client_is_disconnected_and_a_new_client_gets_in():
    with wyoming_in_process(idle_timeout=2.0, max_clients=2) as (address, service, _, _):
        idle = [socket.create_connection(address, timeout=30) for _ in range(2)]
        idle[1].sendall(b'{"type": "descr')  # half an event, trickled: the same deadline
        busy = socket.create_connection(address, timeout=30)
        assert [e.data["code"] for e in read_events(busy)] == ["Busy"]  # both slots held
        busy.close()
        for sock in idle:  # each is told why, then closed
            events = read_events(sock)
            assert [e.type for e in events] == ["error"] and "--idle-timeout" in events[0].data["text"], events
            sock.close()
        assert service.stats["closed_idle"] == 2

        async def describe():
            async with AsyncTcpClient(*address, read_timeout=30) as client:
                await client.write_event(Describe().event())
                return (await client.read_event()).type

        assert asyncio.run(describe()) == "info"  # a slot is free again


def test_a_client_that_asks_and_never_reads_the_answers_is_idle():
    """describe after describe, none of the answers read: the server's writes wait on the socket, and the
    client is idle (it reads no answer, with nothing being spoken), so it is cut off at the idle timeout."""
    with wyoming_in_process(idle_timeout=1.0) as (address, service, _, _):
        with socket.create_connection(address, timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(5)
            describe = wire(Describe().event())
            with contextlib.suppress(OSError):  # the server stops reading, then hangs up
                for _ in range(2000):  # 2000 answers of ~12 KB: more than the sockets' buffers take
                    sock.sendall(describe * 10)
            wait_for(lambda: service.stats["closed_idle"] == 1, "the idle timeout", timeout=30)
        assert service.stats["events"] < 20_000  # it stopped reading while the client still sent


def test_a_request_past_its_deadline_is_cut_and_its_chunks_cancelled():
    """A chunk that never finishes (``stall``): the request is cut at its deadline (1 s, plus the 0.1 s of audio
    sent), its remaining chunks dropped from the scheduler, and the connection closed."""
    with wyoming_in_process(synthesis_timeout=1.0) as (address, service, scheduler, speaker):
        with socket.create_connection(address, timeout=30) as sock:
            sock.sendall(wire(Synthesize("one stall " + "word " * 50).event()))
            events = read_events(sock)
        assert [e.type for e in events[:2]] == ["audio-start", "audio-chunk"] and events[-1].type == "error"
        assert events[-1].data["code"] == "Timeout" and "--synthesis-timeout" in events[-1].data["text"]
        assert service.stats["closed_deadline"] == 1
        speaker.release.set()  # the stalled chunk ends; the rest were cancelled
        wait_for(lambda: scheduler.snapshot()["requests_cancelled"] == 1, "the request to be cancelled")
        assert scheduler.snapshot()["chunks_cancelled"] == 50


def test_a_client_that_reads_nothing_is_cut_off_and_its_slot_freed():
    """It asks for speech and never reads: its request ends at the deadline and its connection CLOSE_GRACE
    later, whatever is left unsent; another client then gets its slot."""
    with wyoming_in_process(synthesis_timeout=1.0, max_clients=1) as (address, service, scheduler, speaker):
        sock = socket.create_connection(address, timeout=30)
        sock.sendall(wire(Synthesize("one stall two").event()))
        wait_for(lambda: service.stats["closed_deadline"] == 1, "the deadline", timeout=30)

        async def describe():
            async with AsyncTcpClient(*address, read_timeout=30) as client:
                await client.write_event(Describe().event())
                return (await client.read_event()).type

        assert asyncio.run(describe()) == "info"
        sock.close()


def test_a_stream_of_many_sentences_is_planned_a_few_ahead_of_its_audio():
    """300 sentences, one a chunk, from a client that reads nothing: the sentences whose audio the sockets'
    buffers take (20 s each here: about 8), and PLANS_AHEAD more, are planned; not all 300, each a scheduler
    job whose first chunk goes before other clients' later chunks (all 300 were, with 6000 s of audio made)."""
    with wyoming_in_process(chunk_seconds=10.0) as (address, service, scheduler, speaker):
        with socket.create_connection(address, timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            blob = wire(SynthesizeStart().event()) + wire(SynthesizeChunk("One two. ").event()) * 300
            sock.sendall(blob)
            wait_for(lambda: service.stats["events"] == 301, "the chunks to be read")
            assert settled(lambda: scheduler.snapshot()["requests"]) <= 30, scheduler.snapshot()


# -- a real `kokoro-tvm wyoming` ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_server(small_artifact, tmp_path_factory):
    """`kokoro-tvm wyoming` with a 2 s idle timeout and two clients at most: ((host, port), its log)."""
    log_path = tmp_path_factory.mktemp("wyoming-hostile") / "server.log"
    options = ["--idle-timeout", "2", "--max-clients", "2", "--log-level", "info"]
    with running_wyoming(small_artifact, log_path, *options) as address:
        yield address, log_path
    log = log_path.read_text()
    assert "Traceback" not in log and "exception" not in log.lower(), log[-3000:]


MALFORMED = {
    "Infinity as data_length": b'{"type": "synthesize", "data_length": Infinity}\n',
    "1e400 as data_length": b'{"type": "synthesize", "data_length": 1e400}\n',
    "a string data_length": b'{"type": "synthesize", "data_length": "12"}\n{"text": "Hi."}',
    "true as payload_length": b'{"type": "synthesize", "payload_length": true}\n',
    "a negative data_length": b'{"type": "synthesize", "data_length": -5}\n',
    "a 5000-digit data_length": b'{"type": "synthesize", "data_length": ' + b"9" * 5000 + b"}\n",
    "60,000 nested brackets": b"[" * 60_000 + b"\n",
    "a header line past the reader's limit": b"[" * 70_000 + b"\n",
    "a header that is a list": b'["synthesize"]\n',
    "a type that is a number": b'{"type": 5}\n',
    "data that is a list": b'{"type": "synthesize", "data": ["Hi."]}\n',
    "data that is a string": b'{"type": "synthesize", "data": "Hi."}\n',
    "a data part that is a list": b'{"type": "synthesize", "data_length": 7}\n["Hi."]',
    "a data part nested 60,000 deep": b'{"type": "synthesize", "data_length": 60000}\n' + b"[" * 60_000,
    "data nested 900 deep": b'{"type": "synthesize", "data": ' + b"[" * 900 + b"]" * 900 + b"}\n",
    "not UTF-8": b'{"type": "\xff\xfe"}\n',
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_event_gets_an_error_event_and_a_clean_close(hostile_server, name):
    address, log_path = hostile_server
    logged = len(log_path.read_text().splitlines())
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(MALFORMED[name])
        events = read_events(sock)
    assert [e.type for e in events] == ["error"] and events[0].data["code"] == "BadEvent", events
    assert "\n" not in events[0].data["text"] and len(events[0].data["text"]) < 200
    wait_for(lambda: len(log_path.read_text().splitlines()) > logged, "the log line")
    new_lines = log_path.read_text().splitlines()[logged:]
    assert len(new_lines) == 1 and "wyoming client 127.0.0.1:" in new_lines[0], new_lines


NESTED: list = []
for _ in range(900):  # readable (under the recursion limit), but never to be repr'd whole
    NESTED = [NESTED]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"text": 5}, "text as a string"),
        ({"text": float("inf")}, "text as a string"),
        ({"text": "Hi.", "voice": "af_heart"}, "must be an object"),
        ({"text": "Hi.", "voice": {"name": ["af_heart"]}}, "must be a string"),
        ({"text": "Hi.", "voice": {"name": NESTED}}, "must be a string, got a JSON array"),
        ({"text": "Hi.", "voice": {"name": "x" * 5000}}, "at most 1000"),
        ({"text": "Hi.", "voice": {"language": "en" * 100}}, "at most 35"),
    ],
)
def test_wrong_types_in_an_event_get_an_error_event_and_the_connection_goes_on(hostile_server, data, message):
    address, log_path = hostile_server

    async def bad_then_describe():
        async with AsyncTcpClient(*address, read_timeout=30) as client:
            await client.write_event(Event("synthesize", data))
            error = await client.read_event()
            await client.write_event(Describe().event())
            return error, await client.read_event()

    error, info = asyncio.run(bad_then_describe())
    assert error.type == "error" and message in error.data["text"] and len(error.data["text"]) < 200, error
    assert info.type == "info"


def test_an_idle_client_of_the_real_server_is_disconnected_and_a_new_one_gets_in(hostile_server):
    address, log_path = hostile_server
    idle = [socket.create_connection(address, timeout=30) for _ in range(2)]
    busy = socket.create_connection(address, timeout=30)
    assert [e.data["code"] for e in read_events(busy)] == ["Busy"]
    busy.close()
    for sock in idle:
        events = read_events(sock)  # after the 2 s idle timeout
        assert [e.type for e in events] == ["error"] and "--idle-timeout" in events[0].data["text"]
        sock.close()

    async def describe():
        async with AsyncTcpClient(*address, read_timeout=30) as client:
            await client.write_event(Describe().event())
            return (await client.read_event()).type

    assert asyncio.run(describe()) == "info"
    assert log_path.read_text().count("(--idle-timeout): closing the connection") >= 2


# -- flags -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command, message",
    [
        (["wyoming", "--idle-timeout", "0"], "--idle-timeout must be a positive number of seconds"),
        (["wyoming", "--synthesis-timeout", "nan"], "--synthesis-timeout must be a positive number of seconds"),
        (["wyoming", "--synthesis-timeout", "inf"], "--synthesis-timeout must be a positive number of seconds"),
        (["wyoming", "--max-ignored-events", "0"], "--max-ignored-events must be at least 1"),
        (["serve", "--wyoming-idle-timeout", "-1"], "--wyoming-idle-timeout must be a positive number of seconds"),
    ],
)
def test_bad_limits_are_one_line(command, message, capsys):
    assert main(command) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
