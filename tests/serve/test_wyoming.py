"""`kokoro-tvm wyoming` against the `wyoming` package's own client, over a real loopback socket.

One server subprocess for the module, on the session's small random-weights artifact, at speed 4 (random weights
speak ~25 frames per token at speed 1). Audio is checked sample for sample against the same Speaker in this
process. The flag and URI errors are checked without a model.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import numpy as np
import pytest

pytest.importorskip("wyoming")

from conftest import running_wyoming  # noqa: E402
from wyoming.audio import AudioChunk, AudioStart  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.event import Event, async_read_event  # noqa: E402
from wyoming.info import Describe, Info  # noqa: E402
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice  # noqa: E402

from kokoro_tvm_ext.cli import main  # noqa: E402
from kokoro_tvm_ext.serve.wyoming import bcp47  # noqa: E402
from kokoro_tvm_ext.speech.audio import to_int16  # noqa: E402

SPEED = 4.0
MAX_CHARS = 200
MAX_CLIENTS = 3
VOICE = "af_heart"
END = ("audio-stop", "error")


@pytest.fixture(scope="module")
def wyoming_server(small_artifact, tmp_path_factory):
    """`kokoro-tvm wyoming` on port 0 (the kernel picks a free one; the server prints it): (host, port)."""
    log_path = tmp_path_factory.mktemp("wyoming") / "server.log"
    options = ["--speed", str(SPEED), "--voice", VOICE, "--max-input-chars", str(MAX_CHARS)]
    options += ["--max-clients", str(MAX_CLIENTS), "--log-level", "info"]
    with running_wyoming(small_artifact, log_path, *options) as address:
        yield address


@pytest.fixture(scope="module")
def speaker(small_artifact):
    """The same model in this process: the reference for the audio."""
    from kokoro_tvm_ext import KokoroTVM
    from kokoro_tvm_ext.speech import Speaker

    return Speaker(KokoroTVM(small_artifact))


def expected_pcm(speaker, text: str, voice: str = VOICE) -> np.ndarray:
    """What the server speaks for ``text``: ``Speaker.speak``'s samples (one sentence per chunk, the first cut
    early, seeds 0, 1, ...)."""
    return to_int16(speaker.speak(text, voice, speed=SPEED).audio)


async def exchange(server, *events: Event, until=END) -> list[Event]:
    """Send ``events`` on a new connection; the events answered up to one of ``until``."""
    async with AsyncTcpClient(*server, read_timeout=60) as client:
        for event in events:
            await client.write_event(event)
        return await read_until(client, until)


async def read_until(client, until=END) -> list[Event]:
    got = []
    while True:
        event = await client.read_event()
        assert event is not None, f"connection closed after {[e.type for e in got]}"
        got.append(event)
        if event.type in until:
            return got


def decoded(events: list[Event]) -> np.ndarray:
    """The PCM of audio-start, audio-chunk..., audio-stop, checked for its format."""
    assert [e.type for e in events[:1] + events[-1:]] == ["audio-start", "audio-stop"], [e.type for e in events]
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    chunks = [AudioChunk.from_event(e) for e in events[1:-1]]
    assert chunks and all(c.rate == 24000 and c.width == 2 and c.channels == 1 for c in chunks)
    return np.frombuffer(b"".join(c.audio for c in chunks), "<i2")


def assert_same_audio(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.abs(got.astype(np.int32) - want).max() <= 1  # int16 rounding at most


def test_describe_lists_every_voice_with_its_language(wyoming_server):
    from kokoro_tvm_ext.speech import list_voices
    from kokoro_tvm_ext.speech.languages import BY_CODE

    info = Info.from_event(asyncio.run(exchange(wyoming_server, Describe().event(), until=("info",)))[-1])
    (program,) = info.tts
    assert program.name == "kokoro-tvm" and program.installed and program.supports_synthesize_streaming
    listed = {v.name: v for v in program.voices}
    installed = list_voices()
    assert sorted(listed) == [v.name for v in installed] and len(listed) >= 1
    for v in installed:
        assert listed[v.name].languages == [bcp47(BY_CODE[v.language].tag)], v.name
        assert listed[v.name].installed and listed[v.name].attribution.name == "hexgrad"
    if "ff_siwis" in listed:
        assert listed["ff_siwis"].languages == ["fr"] and listed["af_heart"].languages == ["en-US"]


def test_synthesize_streams_the_speakers_audio(wyoming_server, speaker):
    text = "Hello there. How are you?"
    events = asyncio.run(exchange(wyoming_server, Synthesize(text, voice=SynthesizeVoice(VOICE)).event()))
    assert_same_audio(decoded(events), expected_pcm(speaker, text))


def test_a_language_alone_picks_a_voice_of_that_language(wyoming_server, speaker):
    from kokoro_tvm_ext.speech import list_voices

    french = [v.name for v in list_voices() if v.language == "f"]
    if not french:
        pytest.skip("no French voice installed")
    text = "Bonjour."
    events = asyncio.run(exchange(wyoming_server, Synthesize(text, voice=SynthesizeVoice(language="fr-FR")).event()))
    assert_same_audio(decoded(events), expected_pcm(speaker, text, french[0]))


def test_streaming_speaks_sentences_given_in_pieces(wyoming_server, speaker):
    pieces = ["Hello the", "re. How are", " you? Fine", "."]
    events = [SynthesizeStart(voice=SynthesizeVoice(VOICE)).event()]
    events += [SynthesizeChunk(p).event() for p in pieces]
    # What Home Assistant also sends inside a stream, for servers that cannot stream: must not be spoken twice.
    events += [Synthesize("".join(pieces), voice=SynthesizeVoice(VOICE)).event(), SynthesizeStop().event()]
    got = asyncio.run(exchange(wyoming_server, *events, until=("synthesize-stopped", "error")))
    assert got[-1].type == "synthesize-stopped"
    # Each sentence planned on its own as it completed, seeds continuing: the audio of the text as one plan.
    assert_same_audio(decoded(got[:-1]), expected_pcm(speaker, "".join(pieces)))


PARAGRAPH = "Hello there, my friend. Dr. Smith met A. Tester at noon! See you soon."


def streamed(server, text: str, size: int) -> np.ndarray:
    """``text`` sent to a Wyoming server in pieces of ``size`` characters: the samples it answers with."""
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    events = [SynthesizeStart(voice=SynthesizeVoice(VOICE)).event(), *(SynthesizeChunk(p).event() for p in pieces)]
    got = asyncio.run(exchange(server, *events, SynthesizeStop().event(), until=("synthesize-stopped", "error")))
    assert got[-1].type == "synthesize-stopped", got[-1]
    return decoded(got[:-1])


def http_pcm(server: str, text: str) -> np.ndarray:
    import httpx

    body = {"input": text, "voice": VOICE, "speed": SPEED, "response_format": "pcm", "stream": False}
    r = httpx.post(f"{server}/v1/audio/speech", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


def solo_pcm(speaker, text: str, speed: float = SPEED) -> np.ndarray:
    """``text``'s plan (``Speaker.plan``, what every front end plans), each chunk synthesized alone with its seed and
    its edges kept as planned (speech/edges.py), back to back: what a server makes of a request it does not batch
    with others."""
    from kokoro_tvm_ext.speech.edges import edge_cut

    plan = speaker.plan(text, VOICE, speed=speed)
    parts = []
    for c in plan.chunks:
        audio = speaker.model.synthesize(c.tokens, c.style, speed=c.speed, noise_seed=c.seed)[0]
        parts.append(edge_cut(audio, c.lead, c.tail).apply(audio))
    return to_int16(np.concatenate(parts))


def test_a_paragraph_gives_the_same_samples_from_http_and_a_wyoming_stream(wyoming_server, server, speaker):
    """One chunking policy: the HTTP server, Wyoming given the whole text and Wyoming given it 7 characters (then
    1) at a time give, sample for sample, the chunks of ``Speaker.plan`` synthesized one by one."""
    want = solo_pcm(speaker, PARAGRAPH)
    np.testing.assert_array_equal(http_pcm(server, PARAGRAPH), want)
    whole = asyncio.run(exchange(wyoming_server, Synthesize(PARAGRAPH, voice=SynthesizeVoice(VOICE)).event()))
    np.testing.assert_array_equal(decoded(whole), want)
    np.testing.assert_array_equal(streamed(wyoming_server, PARAGRAPH, 7), want)
    np.testing.assert_array_equal(streamed(wyoming_server, PARAGRAPH, 1), want)


def test_say_gives_the_samples_of_the_servers(speaker):
    np.testing.assert_array_equal(expected_pcm(speaker, PARAGRAPH), solo_pcm(speaker, PARAGRAPH))


def test_a_stream_on_a_batching_server_gives_the_samples_of_the_whole_text(server_wyoming, speaker):
    """`serve --wyoming` (the default --max-batch, speed 1)."""
    np.testing.assert_array_equal(streamed(server_wyoming, PARAGRAPH, 7), solo_pcm(speaker, PARAGRAPH, 1.0))


def test_a_paragraph_batched_with_three_other_requests_gives_the_same_samples(server, speaker):
    from concurrent.futures import ThreadPoolExecutor

    others = ["One more request here.", "Another voice, another text.", "And a third one, to fill the batch."]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda text: http_pcm(server, text), [PARAGRAPH, *others]))
    np.testing.assert_array_equal(answers[0], solo_pcm(speaker, PARAGRAPH))


def test_streaming_sends_a_sentence_before_the_stream_ends(wyoming_server):
    async def first_audio_before_stop():
        async with AsyncTcpClient(*wyoming_server, read_timeout=60) as client:
            await client.write_event(SynthesizeStart().event())
            await client.write_event(SynthesizeChunk("Hi there. And").event())
            first = await client.read_event()  # no stop sent yet: the first sentence is spoken already
            await client.write_event(SynthesizeStop().event())
            rest = await read_until(client, ("synthesize-stopped", "error"))
            return first, rest

    first, rest = asyncio.run(first_audio_before_stop())
    assert first.type == "audio-start" and rest[-1].type == "synthesize-stopped"
    assert len(decoded([first, *rest[:-1]])) > 0


def test_bad_requests_get_an_error_event_and_the_server_goes_on(wyoming_server, speaker):
    async def bad_then_good():
        async with AsyncTcpClient(*wyoming_server, read_timeout=60) as client:
            answers = []
            for event in (
                Synthesize("Hi.", voice=SynthesizeVoice("af_hart")).event(),
                Synthesize("   ").event(),
                Synthesize("x" * (MAX_CHARS + 1)).event(),
                Event("synthesize", {"voice": {"name": VOICE}}),  # no text
                Synthesize("Hi.", voice=SynthesizeVoice(language="tlh")).event(),
                Synthesize("Hi.", voice=SynthesizeVoice("/etc/voice.npy")).event(),
            ):
                await client.write_event(event)
                answers.append(await client.read_event())
            # The same connection still speaks.
            await client.write_event(Synthesize("Hi.").event())
            return answers, await read_until(client)

    answers, good = asyncio.run(bad_then_good())
    assert [a.type for a in answers] == ["error"] * 6
    texts = [a.data["text"] for a in answers]
    assert "unknown voice 'af_hart'" in texts[0] and "af_heart" in texts[0]
    assert "nothing to speak" in texts[1]
    assert str(MAX_CHARS) in texts[2] and "--max-input-chars" in texts[2]
    assert "text" in texts[3]
    assert "unknown language 'tlh'" in texts[4]
    assert "installed voice" in texts[5]
    want = expected_pcm(speaker, "Hi.")
    assert_same_audio(decoded(good), want)
    # And on a new connection after an unknown voice.
    unknown = asyncio.run(exchange(wyoming_server, Synthesize("Hi.", voice=SynthesizeVoice("nope")).event()))
    assert [e.type for e in unknown] == ["error"]
    assert_same_audio(decoded(asyncio.run(exchange(wyoming_server, Synthesize("Hi.").event()))), want)


def test_a_stream_over_the_limit_is_refused_once(wyoming_server):
    events = [SynthesizeStart().event()]
    events += [SynthesizeChunk("word " * 30).event() for _ in range(3)]  # 450 characters in all
    events += [SynthesizeStop().event(), Describe().event()]
    got = asyncio.run(exchange(wyoming_server, *events, until=("info",)))
    types = [e.type for e in got]
    assert types.count("error") == 1 and "synthesize-stopped" not in types and types[-1] == "info", types
    assert "--max-input-chars" in next(e for e in got if e.type == "error").data["text"]


def test_an_unreadable_event_gets_an_error_and_the_connection_closes(wyoming_server):
    async def garbage(data: bytes):
        reader, writer = await asyncio.open_connection(*wyoming_server)
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(async_read_event(reader), 30)
        closed = await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
        return answer, closed

    for data in (b"hello\n", b'{"type": "synthesize", "data_length": 99999999}\n'):
        answer, closed = asyncio.run(garbage(data))
        assert answer.type == "error" and closed, (data, answer)
    assert "not a Wyoming event" in asyncio.run(garbage(b"hello\n"))[0].data["text"]


def test_clients_beyond_the_limit_are_told_the_server_is_busy(wyoming_server):
    async def one_too_many():
        clients = [AsyncTcpClient(*wyoming_server, read_timeout=30) for _ in range(MAX_CLIENTS + 1)]
        for client in clients[:MAX_CLIENTS]:
            await client.connect()
            await client.write_event(Describe().event())
            assert (await client.read_event()).type == "info"  # admitted
        await clients[-1].connect()
        refused = await clients[-1].read_event()
        for client in clients:
            await client.disconnect()
        return refused

    refused = asyncio.run(one_too_many())
    assert refused.type == "error" and "--max-clients" in refused.data["text"]


# -- without a model ---------------------------------------------------------------------------------------
def test_beside_another_front_end_on_one_scheduler():
    """``start_in_thread`` (what `serve --wyoming` runs) on a scheduler that is not its own, with a stand-in
    Speaker: requests run on that scheduler, and a client that leaves mid-speech has its chunks cancelled."""
    from types import SimpleNamespace

    from fakes import FakeSpeaker

    from kokoro_tvm_ext.serve.scheduler import Scheduler
    from kokoro_tvm_ext.serve.wyoming import WyomingConfig, WyomingService, listen, start_in_thread

    class Speaker(FakeSpeaker):
        def voice(self, voice, lang=None):
            return SimpleNamespace(spec=voice, lang="a")

    fake = Speaker(chunk_seconds=0.1)
    scheduler = Scheduler(fake, ahead=2)
    sock = listen("tcp://127.0.0.1:0")
    port = sock.getsockname()[1]
    handle = start_in_thread(WyomingService(fake, scheduler, WyomingConfig()), sock)
    try:
        events = asyncio.run(exchange(("127.0.0.1", port), Synthesize("one two three").event()))
        assert len(decoded(events)) == 3 * 2400  # a chunk per word, 0.1 s each
        assert scheduler.snapshot()["requests_done"] == 1

        async def leave_after_the_first_chunk():
            async with AsyncTcpClient("127.0.0.1", port, read_timeout=30) as client:
                await client.write_event(Synthesize("word " * 400).event())
                assert (await client.read_event()).type == "audio-start"

        asyncio.run(leave_after_the_first_chunk())
        deadline = time.monotonic() + 30
        while scheduler.snapshot()["requests_cancelled"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = scheduler.snapshot()
        assert stats["requests_cancelled"] == 1 and stats["chunks_cancelled"] > 300, stats
    finally:
        handle.stop()
        scheduler.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # stopped: nobody listens


def test_language_tags_are_written_as_bcp47_writes_them():
    assert bcp47("en-us") == "en-US" and bcp47("pt-br") == "pt-BR" and bcp47("zh") == "zh"


@pytest.mark.parametrize(
    "uri, message",
    [
        ("tcp://127.0.0.1", "port must be specified"),
        ("http://127.0.0.1:10200", "Only 'stdio://', 'unix://', or 'tcp://'"),
        ("tcp://127.0.0.1:99999", "out of range"),
        ("stdio://", "give tcp://HOST:PORT or unix://PATH"),
    ],
)
def test_a_bad_uri_is_one_line_before_any_model(uri, message, capsys):
    assert main(["wyoming", "--uri", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kokoro-tvm wyoming: --uri") and message in err and err.count("\n") == 1, err


def test_a_port_in_use_is_one_line(capsys, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        # --artifact: any directory passes the flag check; the port fails before it is opened.
        assert main(["wyoming", "--uri", f"tcp://127.0.0.1:{port}", "--artifact", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on tcp://127.0.0.1:{port}" in err and "in use" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "flags, message",
    [(["--speed", "0"], "--speed"), (["--max-clients", "0"], "--max-clients"), (["--threads", "0"], "--threads")],
)
def test_bad_flags_are_one_line(flags, message, capsys):
    assert main(["wyoming", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_without_the_wyoming_package_it_says_what_to_install(monkeypatch, capsys, tmp_path):
    import kokoro_tvm_ext.serve

    for name in [m for m in sys.modules if m == "wyoming" or m.startswith("wyoming.")] or ["wyoming"]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it now raises ImportError
    monkeypatch.delitem(sys.modules, "kokoro_tvm_ext.serve.wyoming", raising=False)
    monkeypatch.delattr(kokoro_tvm_ext.serve, "wyoming", raising=False)  # else `from serve import wyoming` finds it
    # An empty --artifact: were the package found, the command would stop at the artifact, not serve.
    assert main(["wyoming", "--uri", "tcp://127.0.0.1:0", "--artifact", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "pip install 'kokoro-tvm-ext[wyoming]'" in err and err.count("\n") == 1, err


def test_serve_with_wyoming_speaks_both_protocols_on_one_model(server, server_wyoming, speaker):
    """`kokoro-tvm serve --wyoming`: a Wyoming request runs on the HTTP server's scheduler (its /health counts
    it) and speaks as the Speaker does (at speed 1: the Wyoming side takes no speed flag here)."""
    import httpx

    text = "Hello there."
    before = httpx.get(f"{server}/health", timeout=30).json()["scheduler"]["requests"]
    events = asyncio.run(exchange(server_wyoming, Synthesize(text=text, voice=SynthesizeVoice(name=VOICE)).event()))
    want = speaker.speak(text, VOICE)
    assert_same_audio(decoded(events), to_int16(want.audio))
    assert httpx.get(f"{server}/health", timeout=30).json()["scheduler"]["requests"] == before + 1
    assert (
        httpx.post(f"{server}/v1/audio/speech", json={"input": "Hi.", "speed": SPEED}, timeout=120).status_code == 200
    )
