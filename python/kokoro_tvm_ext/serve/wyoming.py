"""Home Assistant's Wyoming protocol: a text-to-speech program over TCP (or a Unix socket), on the same Speaker
and chunk scheduler as the HTTP server.

Events, as the ``wyoming`` package defines them:

* ``describe`` -> ``info``: one TTS program, ``kokoro-tvm``, with every voice and its language (a BCP-47 tag);
* ``synthesize`` (text; a voice name, or a language) -> ``audio-start``, ``audio-chunk``..., ``audio-stop``:
  16-bit PCM, 24 kHz, mono, each sentence sent as soon as it is made;
* ``synthesize-start``, ``synthesize-chunk``..., ``synthesize-stop`` -> the same audio events, then
  ``synthesize-stopped``. Each complete sentence (:mod:`kokoro_tvm_ext.speech.sentences`, as the whole text
  would be cut) is planned and queued as soon as the text after it has arrived, the rest at the stop, all as
  one speech: the same samples as the whole text sent at once, or as ``Speaker.speak`` of it. The
  ``synthesize`` that Home Assistant also sends inside a stream, for servers without streaming, is ignored;
* ``ping`` -> ``pong``; other events are dropped, as the protocol asks.

Bad input (an unknown voice or language, empty or too long text, an event whose data has the wrong shape) is
answered with an ``error`` event and the connection goes on. An event that cannot be read (not JSON, nested too
deep, a length that is no integer, larger than ``max_event_bytes``) leaves the stream out of step: it gets an
``error`` event and the connection is closed. So does a client idle past ``idle_timeout``, a request that runs
past its deadline (``synthesis_timeout`` plus the audio sent), and more than ``max_ignored_events`` events that
add nothing (empty chunks, events this server ignores) between two requests. Nothing a client sends puts a
traceback in the log, and the work of an event is proportional to its size (the sentence splitter never reads
the text again).

Two ways to run it: ``kokoro-tvm wyoming`` (its own scheduler, ``serve`` in an event loop), or beside the HTTP
server in one process, on the app's scheduler (``start_in_thread``: its own event loop in a thread)::

    sock = listen("tcp://0.0.0.0:10200")  # before loading the model: a bad URI or a port in use fails fast
    handle = start_in_thread(WyomingService(speaker, app.state.scheduler, WyomingConfig()), sock)
    ...
    handle.stop()
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import socket
import stat
import threading
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, write_event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler, AsyncServer, AsyncTcpServer, AsyncUnixServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from kokoro_tvm_ext import __version__
from kokoro_tvm_ext.serve.chunk_stream import ChunkStream, SynthesisError
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS, WYOMING_URI
from kokoro_tvm_ext.speech import DEFAULT_VOICE, FIRST_CHUNK_TOKENS, list_voices
from kokoro_tvm_ext.speech.audio import to_int16
from kokoro_tvm_ext.speech.languages import BY_CODE, resolve_lang
from kokoro_tvm_ext.speech.markup import reading_tags
from kokoro_tvm_ext.speech.sentences import SentenceBuffer, ends_paragraph
from kokoro_tvm_ext.speech.ssml import is_ssml
from kokoro_tvm_ext.speech.text_checks import clean_text
from kokoro_tvm_ext.speech.voices import voice_language
from kokoro_tvm_ext.support.errors import AssetError, InputWarning, InvalidInputError, KokoroError, RequestCancelled

log = logging.getLogger("kokoro_tvm_ext.serve.wyoming")

PROGRAM = "kokoro-tvm"
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM
AUDIO_EVENT_SECONDS = 1.0  # a sentence's audio goes out in events of at most this long
PLANS_AHEAD = 2  # a stream's sentences planned and queued before the one being sent is done
CLOSE_GRACE = 2.0  # seconds a closed connection may take to send what is left, before it is cut off
MAX_VOICE_CHARS = 1000  # a voice name or blend (54 voices with weights fit); more is refused unread
MAX_LANGUAGE_CHARS = 35  # the longest BCP-47 tag in common use
KOKORO = Attribution(name="hexgrad", url="https://huggingface.co/hexgrad/Kokoro-82M")
US = Attribution(name="kokoro-tvm-ext", url="https://pypi.org/project/kokoro-tvm-ext/")


@dataclass(frozen=True)
class WyomingConfig:
    """What the server speaks with and its bounds (the flags of ``kokoro-tvm wyoming``)."""

    voice: str = DEFAULT_VOICE  # when a request names neither a voice nor a language
    speed: float = 1.0  # the protocol has no speed: the server's
    max_input_chars: int = MAX_INPUT_CHARS  # text of one request, streamed or not
    max_clients: int = 16  # connections at once; more get an error event and are closed
    max_event_bytes: int = 1 << 20  # an event's data and payload; a larger one closes the connection
    first_chunk_tokens: int = (
        FIRST_CHUNK_TOKENS  # the first chunk cut early, as everywhere (0: the first clause, past 60 tokens)
    )
    idle_timeout: float = 120.0  # seconds without an event while one is awaited (or nothing is spoken); then closed
    synthesis_timeout: float = 300.0  # a request's deadline: seconds from its start plus the audio sent
    max_ignored_events: int = 1000  # events adding nothing between two requests that speak; more: closed


class BadEvent(Exception):
    """An event that cannot be read: the stream is out of step after it."""


def _length(header: dict, field: str) -> int:
    """A header's ``data_length`` or ``payload_length``: absent, null or an integer >= 0 (not a float, a
    string or ``true``: what the package writes is an integer)."""
    value = header.get(field)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise BadEvent(f"the {field} of an event must be an integer >= 0, got {_shown(value)}")
    return value


def _shown(value) -> str:
    """A client's value for a message: short, and an array or object only named (its repr would read it all,
    recursively: it may be nested hundreds deep)."""
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json(raw: bytes, what: str):
    try:
        return json.loads(raw)
    except RecursionError:  # nested past Python's recursion limit: refused, not a traceback
        raise BadEvent(f"{what}: its JSON is nested too deep; is this a Wyoming client?") from None
    except ValueError:  # not JSON, not UTF-8, or an integer of more than 4300 digits
        raise BadEvent(f"{what}: {raw[:80]!r} cannot be read as JSON; is this a Wyoming client?") from None


async def read_event(reader: asyncio.StreamReader, max_bytes: int) -> tuple[Event, int] | None:
    """The next event and its size in bytes, None at the end of the stream. The package's ``async_read_event``
    reads any ``data_length`` into memory and answers a malformed event as the end of the stream; this one
    bounds the sizes, checks every field's type and says what was wrong (BadEvent)."""
    try:
        line = await reader.readline()
    except ValueError:  # longer than the reader's limit
        raise BadEvent("an event's header line is too long; is this a Wyoming client?") from None
    if not line:
        return None
    header = _json(line, "not a Wyoming event")
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise BadEvent(f"not a Wyoming event: {line[:80]!r}; is this a Wyoming client?")
    kind, data = header["type"], header.get("data")
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        raise BadEvent(f"the data of a {_shown(kind)} event must be a JSON object, got {_shown(data)}")
    data_length, payload_length = _length(header, "data_length"), _length(header, "payload_length")
    if data_length + payload_length > max_bytes:
        raise BadEvent(
            f"a {_shown(kind)} event of {data_length + payload_length} bytes; this server reads at most {max_bytes}"
        )
    try:
        if data_length:
            extra = _json(await reader.readexactly(data_length), f"the data of a {_shown(kind)} event")
            if not isinstance(extra, dict):
                raise BadEvent(f"the data of a {_shown(kind)} event must be a JSON object, got {_shown(extra)}")
            data.update(extra)
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None  # the client left in the middle of an event
    return Event(type=kind, data=data, payload=payload), len(line) + data_length + payload_length


def _event_bytes(event: Event) -> bytes:
    """An event as the package writes it, for a write that must not wait for the client."""
    buffer = io.BytesIO()
    write_event(event, buffer)
    return buffer.getvalue()


def bcp47(tag: str) -> str:
    """``en-us`` -> ``en-US``: a region subtag in capitals, as BCP-47 writes it (and Home Assistant matches)."""
    head, *rest = tag.split("-")
    return "-".join([head, *(p.upper() if len(p) == 2 else p for p in rest)])


def describe_voices() -> list[TtsVoice]:
    """Every installed voice with its language; ``installed``: a voice from the kokoro sdist is unpacked
    on its first use, so every listed voice can speak."""
    voices = []
    for v in list_voices():
        lang = BY_CODE.get(v.language)
        gender = v.gender if v.gender != "?" else None
        description = ", ".join(x for x in (lang.name if lang else None, gender) if x) or v.name
        voices.append(
            TtsVoice(
                name=v.name,
                attribution=KOKORO,
                installed=True,
                description=description,
                version="1.0",  # Kokoro-82M v1.0's voice packs
                languages=[bcp47(lang.tag)] if lang else [],
            )
        )
    return voices


def describe(version: str | None = None) -> Info:
    version = version if version is not None else __version__
    return Info(
        tts=[
            TtsProgram(
                name=PROGRAM,
                attribution=US,
                installed=True,
                description="Kokoro-82M text to speech on Apache TVM",
                version=version,
                voices=describe_voices(),
                supports_synthesize_streaming=True,
            )
        ]
    )


def listen(uri: str, flag: str = "--uri") -> socket.socket:
    """A listening socket for ``tcp://HOST:PORT`` (port 0: any free one) or ``unix://PATH``, bound now, so that a
    bad URI (InvalidInputError) or a port in use (OSError) is reported before the model loads."""
    try:
        parsed = AsyncServer.from_uri(uri)
    except ValueError as err:
        raise InvalidInputError(f"{flag} {uri!r}: {err} (for example {WYOMING_URI})") from None
    if isinstance(parsed, AsyncTcpServer):
        try:
            family, _, _, _, address = socket.getaddrinfo(
                parsed.host, parsed.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
        except socket.gaierror as err:
            raise InvalidInputError(f"{flag} {uri!r}: cannot resolve {parsed.host!r} ({err.strerror})") from None
        try:
            return socket.create_server(address, family=family)
        except OSError as err:
            raise OSError(f"cannot listen on {uri}: {err.strerror or err}") from None
    if isinstance(parsed, AsyncUnixServer):
        path = Path(parsed.socket_path)
        if path.exists() and stat.S_ISSOCK(path.stat().st_mode):
            path.unlink()  # a socket left by a server that was killed
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(os.fspath(path))
            sock.listen()
        except OSError as err:
            sock.close()
            raise OSError(f"cannot listen on {uri}: {err.strerror or err}") from None
        return sock
    raise InvalidInputError(f"{flag} {uri!r}: give tcp://HOST:PORT or unix://PATH (for example {WYOMING_URI})")


def address_of(sock: socket.socket) -> str:
    """The URI a listening socket answers on (the port it got, for port 0)."""
    if sock.family == socket.AF_UNIX:
        return f"unix://{sock.getsockname()}"
    host, port = sock.getsockname()[:2]
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def _submit(scheduler, plan) -> ChunkStream:
    try:
        return ChunkStream(scheduler, plan)
    except RuntimeError:  # the scheduler has stopped: the process is shutting down
        raise InvalidInputError("the server is shutting down; try again in a moment") from None


class TextStream:
    """A request's text, given whole or arriving in pieces -> the plans of ONE speech. ``add`` cuts off the
    complete sentences as soon as the text after them proves them complete (cut as the whole text would be);
    ``plan`` plans each such piece, in order, as the next part of the speech: every sentence read alone, the
    first chunk cut early only at the speech's start, the noise seeds going on. So the pieces together give
    what ``Speaker.plan`` gives the whole text, chunk for chunk and seed for seed."""

    def __init__(self, speaker, voice, *, speed: float = 1.0, first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS):
        self.speaker, self.voice, self.speed = speaker, voice, speed
        self.first_chunk_tokens = first_chunk_tokens
        self._sentences = SentenceBuffer(voice.lang or "a")
        self._chunks = 0  # chunks planned so far: the next one's seed (a pause takes none)
        self._after_sentence = False  # the last piece ended with a spoken sentence of a paragraph that goes on
        self._tags = ""  # the voice and rate tags in force after the text planned so far
        self._document: list[str] | None = None  # an SSML document, held until its end (None: plain text)
        self._started = False

    def add(self, text: str) -> str:
        """More text; what of the text so far is complete sentences now, not given before (maybe ''). The
        text is cleaned first, as ``Speaker.plan`` cleans it, so the cuts see the characters the plan reads. A
        text that starts with ``<`` is an SSML document: it is planned whole at the end."""
        text = clean_text(text)
        if not self._started and text.strip():
            self._started = True
            if text.lstrip().startswith("<"):
                self._document = []
        if self._document is not None:
            self._document.append(text)
            return ""
        return self._sentences.add(text)

    def rest(self) -> str:
        """The text not given by ``add`` (the last sentence, ended or not; an SSML document whole)."""
        if self._document is not None:
            document, self._document = "".join(self._document), []
            return document
        return self._sentences.rest()

    @property
    def work(self) -> int:
        """Characters the sentence splitter has read so far (:attr:`SentenceBuffer.work`)."""
        return self._sentences.work

    def plan(self, text: str, cancel: threading.Event | None = None, *, last: bool = True):
        """``text`` (what ``add`` or ``rest`` gave, in order, or the whole text) planned as the speech's next part;
        ``last``: nothing comes after it (``rest``'s, or the whole text). What ``add`` gives is followed by more of
        its paragraph unless it ends with a blank line (the text after it proved it complete)."""
        if not is_ssml(text):  # the voice and rate tags of the pieces before: read as in the whole text
            text, self._tags = self._tags + text, reading_tags(text, self._tags)
        plan = self.speaker.plan(
            text,
            self.voice,
            speed=self.speed,
            chunk_seeds=lambda i, base=self._chunks: base + i,
            first_chunk_tokens=self.first_chunk_tokens if self._chunks == 0 else None,
            cancel=cancel,
            after_sentence=self._after_sentence,
            continues=not last and not ends_paragraph(text),
        )
        self._chunks += sum(not chunk.is_pause for chunk in plan.chunks)
        # The splitter gives a piece with the blank line that ends its paragraph, if one does.
        self._after_sentence = not plan.chunks[-1].is_pause and not ends_paragraph(text)
        return plan


class Utterance:
    """One request's speech: its text, whole or in pieces (``add``, then ``finish``), planned piece by piece in
    order on a worker thread, its chunks queued on the scheduler as soon as planned (at most PLANS_AHEAD
    pieces ahead of the one being sent, so a stream of many short sentences never floods the scheduler) and
    written out as one audio stream: ``audio-start``, the chunks as they are made, ``audio-stop`` (then
    ``synthesize-stopped`` for a stream), or an ``error`` event in their place from the first failure on.
    Its deadline: ``synthesis_timeout`` seconds from its start plus the length of the audio sent, so a
    client playing it in real time is never cut."""

    def __init__(self, service: WyomingService, write, voice, *, streaming: bool):
        self.service = service
        self.write = write
        self.voice = voice
        self.streaming = streaming
        self.chars = 0
        config = service.config
        self.text = TextStream(service.speaker, voice, speed=config.speed, first_chunk_tokens=config.first_chunk_tokens)
        self.spoken_text = False  # whether any text with something to say was given
        self.failed = False
        self.ended = False  # its audio-stop or error is written, or it was cancelled
        self.started = asyncio.get_running_loop().time()
        self.audio_seconds = 0.0  # of the audio written so far
        self._texts: asyncio.Queue = asyncio.Queue()  # (piece, whether last) to plan, in order; None at the end
        self._plans: asyncio.Queue = asyncio.Queue(PLANS_AHEAD)  # ChunkStreams or an error, in order; None at the end
        self._scheduled: list[ChunkStream] = []
        self._cancel = threading.Event()  # stops a plan in progress
        self._planner = asyncio.create_task(self._plan_all())
        self._speaker = asyncio.create_task(self._speak_all())

    @property
    def deadline(self) -> float:
        """The event loop's time past which it is cut."""
        return self.started + self.service.config.synthesis_timeout + self.audio_seconds

    def add(self, text: str) -> None:
        """More text; complete sentences go to planning now (all of it, for a request given whole)."""
        limit = self.service.config.max_input_chars
        self.chars += len(text)
        if self.chars > limit:
            raise InvalidInputError(
                f"the text is {self.chars} characters or more; this server takes at most {limit} per request "
                "(--max-input-chars): split it"
            )
        if self.streaming:
            work = self.text.work
            text = self.text.add(text)
            self.service.stats["splitter_work"] += self.text.work - work
        self._queue_text(text, last=not self.streaming)

    def finish(self) -> None:
        self._queue_text(self.text.rest(), last=True)
        if not self.spoken_text:
            self._plans.put_nowait(InvalidInputError("synthesize has no text: nothing to speak"))
        self._texts.put_nowait(None)

    async def done(self) -> None:
        await asyncio.gather(self._planner, self._speaker, return_exceptions=True)

    def cancel(self) -> None:
        self.ended = True
        self._cancel.set()
        for task in (self._planner, self._speaker):
            task.cancel()
        for scheduled in self._scheduled:
            scheduled.cancel()

    def _queue_text(self, text: str, last: bool) -> None:
        if text.strip():
            self.spoken_text = True
            self._texts.put_nowait((text, last))

    async def _plan_all(self) -> None:
        while (piece := await self._texts.get()) is not None:
            text, last = piece
            try:
                plan = await asyncio.to_thread(self.text.plan, text, self._cancel, last=last)
                scheduled = _submit(self.service.scheduler, plan)
            except RequestCancelled:
                return
            except KokoroError as err:
                await self._plans.put(err)
                return
            except Exception as err:  # noqa: BLE001 - a bug: said to the client, its traceback logged
                failure = SynthesisError("planning the text failed")
                failure.__cause__ = err
                await self._plans.put(failure)
                return
            self._scheduled.append(scheduled)
            await self._plans.put(scheduled)  # waits while PLANS_AHEAD pieces wait to be sent
        await self._plans.put(None)

    async def _speak_all(self) -> None:
        rate = self.service.speaker.sample_rate
        fmt = {"rate": rate, "width": SAMPLE_WIDTH, "channels": 1}
        step = int(rate * AUDIO_EVENT_SECONDS)
        started = False
        try:
            while (item := await self._plans.get()) is not None:
                if isinstance(item, Exception):
                    raise item
                async for chunk in item:
                    if not started:
                        await self.write(AudioStart(**fmt).event())
                        started = True
                    pcm = to_int16(chunk.audio)
                    for at in range(0, len(pcm), step):
                        piece = pcm[at : at + step]
                        await self.write(AudioChunk(audio=piece.tobytes(), **fmt).event())
                        self.audio_seconds += len(piece) / rate
            await self.write(AudioStop().event())
            if self.streaming:
                await self.write(SynthesizeStopped().event())
        except KokoroError as err:
            log.info("wyoming request refused: %s", err)
            await self._fail(Error(text=str(err), code=type(err).__name__))
        except SynthesisError as err:
            log.error("wyoming request failed: %s", err, exc_info=err.__cause__)
            await self._fail(Error(text=f"{err} (see the server's log)", code="SynthesisError"))
        except ConnectionError:
            self.cancel_scheduled()
        except asyncio.CancelledError:
            self.cancel_scheduled()
            raise
        finally:
            self.ended = True

    async def _fail(self, error: Error) -> None:
        self.failed = True
        self.cancel_scheduled()
        try:
            await self.write(error.event())
        except ConnectionError:
            pass  # the client has left

    def cancel_scheduled(self) -> None:
        self._cancel.set()
        self._planner.cancel()
        for scheduled in self._scheduled:
            scheduled.cancel()


def _voice_fields(data: dict) -> tuple[str | None, str | None]:
    """``(name, language)`` of a synthesize event's voice, checked (a name overrides the language)."""
    voice = data.get("voice")
    if voice is None:
        return None, None
    if not isinstance(voice, dict):
        raise InvalidInputError('the voice of a synthesize event must be an object such as {"name": "af_heart"}')
    name, language = voice.get("name"), voice.get("language")
    for field, value, limit in (("name", name, MAX_VOICE_CHARS), ("language", language, MAX_LANGUAGE_CHARS)):
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"the voice {field} must be a string, got {_shown(value)}")
        if value is not None and len(value) > limit:
            raise InvalidInputError(
                f"the voice {field} is {len(value)} characters; at most {limit}: `describe` lists the voices"
            )
    return name, language


class WyomingHandler(AsyncEventHandler):
    """One client connection: its events answered in order; a streaming request's audio written while the
    rest of its text arrives. A watchdog hangs up on a client idle past ``idle_timeout`` (waiting for its
    next event, or for it to read an answer, with no request being spoken) and on a request past its
    deadline; a client that reads nothing is cut off CLOSE_GRACE after the hang-up, its slot freed at once."""

    def __init__(self, service: WyomingService, reader, writer):
        super().__init__(reader, writer)
        self.service = service
        self.peer = _peer(writer)
        self._stream: Utterance | None = None  # the synthesize-start ... synthesize-stop in progress
        self._utterances: set[Utterance] = set()
        self._loop = asyncio.get_running_loop()
        self._idle_since = self._loop.time()  # the last event read, or the last request answered
        self._reading = False  # waiting for the client's next event
        self._ignored = 0  # events that added nothing since the last request that speaks
        self._admitted = False  # holds one of the service's max_clients slots
        self._closed = False  # hung up: nothing more is written
        self._wake = asyncio.Event()  # the watchdog recomputes its deadline

    async def run(self) -> None:
        """As the package's, with bounded reads, an error event for an unreadable event, the client limit and
        the watchdog."""
        try:
            await self._converse()
        except ConnectionError:
            pass  # the client left, or was hung up on during a read
        except asyncio.CancelledError:  # the server is stopping
            self._hang_up()
            self.writer.transport.abort()
            raise
        finally:
            client_left = not self._closed  # its end of the stream, or a reset; not a hang-up
            self._hang_up()
            await self.disconnect()
        if client_left:
            self.writer.transport.close()
        else:
            await self._linger()

    async def _converse(self) -> None:
        if not self.service.admit():
            self.service.stats["refused_busy"] += 1
            limit = self.service.config.max_clients
            self._hang_up(f"the server is busy: {limit} clients are connected (--max-clients)", "Busy")
            return
        self._admitted = True
        watchdog = asyncio.create_task(self._watch())
        try:
            while not self._closed:
                self._reading = True
                self._wake.set()
                try:
                    read = await read_event(self.reader, self.service.config.max_event_bytes)
                except BadEvent as err:
                    self.service.stats["bad_events"] += 1
                    log.info("wyoming client %s: %s", self.peer, err)
                    self._hang_up(str(err), "BadEvent")
                    return
                finally:
                    self._reading = False
                if read is None:
                    return
                event, size = read
                self.service.stats["events"] += 1
                self.service.stats["bytes"] += size
                self._idle_since = self._loop.time()
                if not await self.handle_event(event):
                    return
        finally:
            watchdog.cancel()

    async def disconnect(self) -> None:
        for utterance in self._utterances:
            utterance.cancel()

    async def write_event(self, event: Event) -> None:
        if self._closed:
            raise ConnectionResetError("the connection was closed")
        await super().write_event(event)

    def _hang_up(self, text: str | None = None, code: str = "") -> None:
        """End the connection now: its requests cancelled, its slot freed, a read in progress stopped, an
        ``error`` event with ``text`` sent if the client reads (never waited for); the socket is cut off
        CLOSE_GRACE later whatever happens (``_linger`` closes it sooner)."""
        if self._closed:
            return
        self._closed = True
        if self._admitted:
            self._admitted = False
            self.service.leave()
        for utterance in self._utterances:
            utterance.cancel()
        transport = self.writer.transport
        if transport.is_closing():
            return
        if text is not None:
            transport.write(_event_bytes(Error(text=text, code=code).event()))
        # Not feed_eof: the transport may still hand the reader data (a read that completes may resume it).
        self.reader.set_exception(ConnectionAbortedError("the server hung up"))
        self._loop.call_later(CLOSE_GRACE, transport.abort)
        self._wake.set()

    async def _linger(self) -> None:
        """After a hang-up: the end of the stream sent after the farewell, then what the client still sends read
        and dropped until it closes (or the cut-off), so that closing sends no reset, which would make the
        client's system drop the farewell unread."""
        transport = self.writer.transport
        if transport.is_closing():
            return
        closed = self._loop.create_future()
        transport.set_protocol(_Discard(closed))  # the StreamReader is done: nothing reads it again
        transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        try:
            await closed
        finally:
            transport.abort()  # at once if the server is stopping; a no-op once closed

    async def _watch(self) -> None:
        config = self.service.config
        while not self._closed:
            now = self._loop.time()
            speaking = [u for u in self._utterances if not u.ended]
            due: list[tuple[float, Utterance | None]] = [(u.deadline, u) for u in speaking]
            if self._reading or not speaking:
                due.append((self._idle_since + config.idle_timeout, None))
            when, what = min(due, key=lambda d: d[0])
            if when <= now:
                if what is None:
                    self.service.stats["closed_idle"] += 1
                    text = f"no event for {config.idle_timeout:g} s (--idle-timeout): closing the connection"
                else:
                    self.service.stats["closed_deadline"] += 1
                    text = (
                        f"the request took longer than {config.synthesis_timeout:g} s plus the length of the audio "
                        "sent (--synthesis-timeout): stopped, closing the connection; is the client reading?"
                    )
                log.info("wyoming client %s: %s", self.peer, text)
                self._hang_up(text, "Timeout")
                return
            self._wake.clear()
            try:  # until the earliest deadline (they only move later) or a change of state
                await asyncio.wait_for(self._wake.wait(), when - now)
            except asyncio.TimeoutError:
                pass

    async def _error(self, text: str, code: str) -> None:
        await self.write_event(Error(text=text, code=code).event())

    async def handle_event(self, event: Event) -> bool:
        try:
            did = await self._handle(event)
        except KokoroError as err:
            log.info("wyoming request refused: %s", err)
            await self._error(str(err), type(err).__name__)
            return True
        if did:
            return True
        # Empty chunks and events this server ignores cost little each, but no limit of text counts them.
        self.service.stats["ignored_events"] += 1
        self._ignored += 1
        limit = self.service.config.max_ignored_events
        if self._ignored > limit:
            self.service.stats["closed_ignored"] += 1
            text = (
                f"{self._ignored} events that add nothing (an empty synthesize-chunk, or an event this server "
                f"ignores) since the last request; at most {limit}: closing the connection"
            )
            log.info("wyoming client %s: %s", self.peer, text)
            self._hang_up(text, "TooManyEvents")
            return False
        return True

    async def _handle(self, event: Event) -> bool:
        """Answer ``event``; whether it did anything (False: an event that adds nothing, counted)."""
        data = event.data
        if Describe.is_type(event.type):
            await self.write_event(self.service.info_event)
        elif Ping.is_type(event.type):
            text = data.get("text")
            await self.write_event(Pong(text=text if isinstance(text, str) else None).event())
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return False  # Home Assistant's copy of a stream's text for servers that cannot stream
            text = data.get("text")
            if not isinstance(text, str):
                raise InvalidInputError("a synthesize event needs its text as a string")
            utterance = self._start(data, streaming=False)
            try:
                utterance.add(text)
            except KokoroError:
                utterance.cancel()
                self._utterances.discard(utterance)
                raise
            self.service.stats["text_chars"] += len(text)
            utterance.finish()
            self._spoke(utterance)
            await self._finish(utterance)
        elif SynthesizeStart.is_type(event.type):
            if self._stream is not None:
                raise InvalidInputError("a synthesize-start inside a stream; send synthesize-stop first")
            self._stream = self._start(data, streaming=True)
        elif SynthesizeChunk.is_type(event.type):
            text = data.get("text")
            if not isinstance(text, str):
                raise InvalidInputError("a synthesize-chunk event needs its text as a string")
            stream = self._stream
            if stream is None or stream.failed or not text:
                return False  # no stream, or it was answered with an error already; or nothing in it
            try:
                stream.add(text)
            except KokoroError:
                stream.cancel()
                stream.failed = True
                raise
            self.service.stats["text_chars"] += len(text)
        elif SynthesizeStop.is_type(event.type):
            stream, self._stream = self._stream, None
            if stream is None:
                return False
            if not stream.failed:
                stream.finish()
                self._spoke(stream)
            await self._finish(stream)
        else:
            return False  # dropped, as the protocol asks
        return True

    def _spoke(self, utterance: Utterance) -> None:
        if utterance.spoken_text:  # a request that costs synthesis: the count of empty events starts again
            self._ignored = 0

    def _start(self, data: dict, *, streaming: bool) -> Utterance:
        voice = self.service.voice_for(*_voice_fields(data))
        utterance = Utterance(self.service, self.write_event, voice, streaming=streaming)
        self._utterances.add(utterance)
        self._wake.set()
        return utterance

    async def _finish(self, utterance: Utterance) -> None:
        try:
            await utterance.done()
        finally:
            self._utterances.discard(utterance)
            self._idle_since = self._loop.time()


class _Discard(asyncio.Protocol):
    """A hung-up connection's input: dropped until the client closes (or the cut-off aborts it)."""

    def __init__(self, closed: asyncio.Future):
        self.closed = closed

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # the transport closes

    def connection_lost(self, exc) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _peer(writer) -> str:
    """The client's address for the log."""
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"[{peer[0]}]:{peer[1]}" if ":" in str(peer[0]) else f"{peer[0]}:{peer[1]}"
    return str(peer or "unix socket")


class WyomingService:
    """What every connection shares: the Speaker, the scheduler its chunks run on, the config, the info."""

    def __init__(self, speaker, scheduler, config: WyomingConfig | None = None):
        self.speaker = speaker
        self.scheduler = scheduler
        self.config = config or WyomingConfig()
        self.info_event = describe().event()
        warnings.filterwarnings("ignore", category=InputWarning)  # each request's: its client's, not the log's
        self._languages = {}  # one-letter code -> the voice that speaks it when only a language is asked for
        for v in list_voices():
            self._languages.setdefault(v.language, v.name)
        try:
            self._default = self.speaker.voice(self.config.voice)  # an unknown default voice fails at the start
            default_lang = self._default.lang
        except AssetError:  # its pack cannot be installed now: each request says so (the HTTP side does too)
            self._default = None
            default_lang = voice_language(self.config.voice)
        if default_lang:
            self._languages[default_lang] = self.config.voice
        self._clients = 0
        self._handlers: set[asyncio.Task] = set()
        # What the connections did, for tests and monitoring: events and bytes read, characters of text, the
        # sentence splitter's work (linear in the text), ignored events, and why connections were closed.
        self.stats: Counter = Counter()

    def voice_for(self, name: str | None, language: str | None):
        """The request's voice: its name (or blend), else the default voice of its language, else the default."""
        if name:
            if name.strip().endswith((".npy", ".pt")):  # a path on this machine: not for clients to choose
                raise InvalidInputError(f"voice {name!r}: name an installed voice; `describe` lists them")
            return self.speaker.voice(name)
        if language:
            code = self._language_code(language)
            if code not in self._languages:
                raise InvalidInputError(f"no voice speaks {language!r}; `describe` lists the voices")
            return self.speaker.voice(self._languages[code])
        return self._default or self.speaker.voice(self.config.voice)

    @staticmethod
    def _language_code(language: str) -> str:
        """A tag as Home Assistant sends it (``en-US``, ``fr``, ``en-AU``) -> our code; the primary
        subtag alone when the region is not one we know (``en-AU`` -> English)."""
        try:
            return resolve_lang(language)
        except InvalidInputError:
            primary = language.replace("_", "-").split("-")[0]
            if primary == language:
                raise
            return resolve_lang(primary)

    def admit(self) -> bool:
        if self._clients >= self.config.max_clients:
            return False
        self._clients += 1
        return True

    def leave(self) -> None:
        self._clients -= 1

    async def _connected(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await WyomingHandler(self, reader, writer).run()
        except asyncio.CancelledError:
            pass  # the server is stopping (``serve``): a cancelled task here would be logged with a traceback
        finally:
            self._handlers.discard(task)

    async def serve(self, sock: socket.socket, stop: asyncio.Event | None = None) -> None:
        """Answer clients on ``sock`` (from ``listen``) until ``stop`` is set (or forever)."""
        if sock.family == socket.AF_UNIX:
            server = await asyncio.start_unix_server(self._connected, sock=sock)
        else:
            server = await asyncio.start_server(self._connected, sock=sock)
        async with server:
            if stop is None:
                await server.serve_forever()
            else:
                await stop.wait()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)


class WyomingThread:
    """A Wyoming server on its own event loop in a daemon thread (beside uvicorn's); ``stop`` ends it."""

    def __init__(self, service: WyomingService, sock: socket.socket):
        self.address = address_of(sock)
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, args=(service, sock), name="wyoming", daemon=True)
        self._thread.start()

    def _run(self, service: WyomingService, sock: socket.socket) -> None:
        try:
            self._loop.run_until_complete(service.serve(sock, self._stop))
            self._loop.run_until_complete(self._loop.shutdown_default_executor())  # the planning threads
        finally:
            self._loop.close()
            sock.close()

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout)


def start_in_thread(service: WyomingService, sock: socket.socket) -> WyomingThread:
    """Serve Wyoming on ``sock`` (from ``listen``) in a thread, e.g. beside ``kokoro-tvm serve`` on the app's
    scheduler (``app.state.scheduler``), so one model answers both protocols."""
    return WyomingThread(service, sock)
