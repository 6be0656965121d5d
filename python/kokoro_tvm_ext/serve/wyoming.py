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
answered with an ``error`` event and the connection goes on. An event that cannot be read (not JSON, larger than
``max_event_bytes``) leaves the stream out of step: it gets an ``error`` event and the connection is closed.
Nothing a client sends puts a traceback in the log.

Two ways to run it: ``kokoro-tvm wyoming`` (its own scheduler, ``serve`` in an event loop), or beside the HTTP
server in one process, on the app's scheduler (``start_in_thread``: its own event loop in a thread)::

    sock = listen("tcp://0.0.0.0:10200")  # before loading the model: a bad URI or a port in use fails fast
    handle = start_in_thread(WyomingService(speaker, app.state.scheduler, WyomingConfig()), sock)
    ...
    handle.stop()
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler, AsyncServer, AsyncTcpServer, AsyncUnixServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.serve.chunk_stream import ChunkStream, SynthesisError
from kokoro_tvm_ext.speech import DEFAULT_VOICE, FIRST_CHUNK_TOKENS, list_voices
from kokoro_tvm_ext.speech.audio import to_int16
from kokoro_tvm_ext.speech.g2p.languages import BY_CODE, resolve_lang
from kokoro_tvm_ext.speech.sentences import SentenceBuffer
from kokoro_tvm_ext.speech.text_checks import clean_text
from kokoro_tvm_ext.speech.voices import voice_language
from kokoro_tvm_ext.support.errors import AssetError, InvalidInputError, KokoroError, RequestCancelled

log = logging.getLogger("kokoro_tvm_ext.serve.wyoming")

PROGRAM = "kokoro-tvm"
DEFAULT_URI = "tcp://127.0.0.1:10200"
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM
CHUNKS_AHEAD = 2  # a standalone scheduler's pacing, as the HTTP app's: one chunk being sent, one ready
AUDIO_EVENT_SECONDS = 1.0  # a sentence's audio goes out in events of at most this long
KOKORO = Attribution(name="hexgrad", url="https://huggingface.co/hexgrad/Kokoro-82M")
US = Attribution(name="kokoro-tvm-ext", url="https://pypi.org/project/kokoro-tvm-ext/")


@dataclass(frozen=True)
class WyomingConfig:
    """What the server speaks with and its bounds (the flags of ``kokoro-tvm wyoming``)."""

    voice: str = DEFAULT_VOICE  # when a request names neither a voice nor a language
    speed: float = 1.0  # the protocol has no speed: the server's
    max_input_chars: int = 10_000  # text of one request, streamed or not
    max_clients: int = 16  # connections at once; more get an error event and are closed
    max_event_bytes: int = 1 << 20  # an event's data and payload; a larger one closes the connection
    first_chunk_tokens: int = FIRST_CHUNK_TOKENS  # the first chunk cut early, as everywhere (0: the first clause)


class BadEvent(Exception):
    """An event that cannot be read: the stream is out of step after it."""


async def read_event(reader: asyncio.StreamReader, max_bytes: int) -> Event | None:
    """The next event, None at the end of the stream. The package's ``async_read_event`` reads any
    ``data_length`` into memory and answers a malformed event as the end of the stream; this one bounds
    the sizes and says what was wrong (BadEvent)."""
    try:
        line = await reader.readline()
    except ValueError:  # longer than the reader's limit
        raise BadEvent("an event's header line is too long; is this a Wyoming client?") from None
    if not line:
        return None
    try:
        header = json.loads(line)
        kind = header["type"]
        data = header.get("data") or {}
        data_length = int(header.get("data_length") or 0)
        payload_length = int(header.get("payload_length") or 0)
        if not isinstance(kind, str) or not isinstance(data, dict) or data_length < 0 or payload_length < 0:
            raise TypeError
    except (ValueError, TypeError, KeyError, AttributeError):
        raise BadEvent(f"not a Wyoming event: {line[:80]!r}; is this a Wyoming client?") from None
    if data_length + payload_length > max_bytes:
        raise BadEvent(f"a {kind} event of {data_length + payload_length} bytes; this server reads at most {max_bytes}")
    try:
        if data_length:
            extra = json.loads(await reader.readexactly(data_length))
            if not isinstance(extra, dict):
                raise BadEvent(f"the data of a {kind} event is not a JSON object")
            data.update(extra)
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None  # the client left in the middle of an event
    except ValueError:
        raise BadEvent(f"the data of a {kind} event is not JSON") from None
    return Event(type=kind, data=data, payload=payload)


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
    version = version if version is not None else _native.__version__
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
        raise InvalidInputError(f"{flag} {uri!r}: {err} (for example {DEFAULT_URI})") from None
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
    raise InvalidInputError(f"{flag} {uri!r}: give tcp://HOST:PORT or unix://PATH (for example {DEFAULT_URI})")


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

    def add(self, text: str) -> str:
        """More text; what of the text so far is complete sentences now, not given before (maybe ''). The
        text is cleaned first, as ``Speaker.plan`` cleans it, so the cuts see the characters the plan reads."""
        return self._sentences.add(clean_text(text))

    def rest(self) -> str:
        """The text not given by ``add`` (the last sentence, ended or not)."""
        return self._sentences.rest()

    def plan(self, text: str, cancel: threading.Event | None = None):
        """``text`` (what ``add`` or ``rest`` gave, in order, or the whole text) planned as the speech's next part."""
        plan = self.speaker.plan(
            text,
            self.voice,
            speed=self.speed,
            chunk_seeds=lambda i, base=self._chunks: base + i,
            first_chunk_tokens=self.first_chunk_tokens if self._chunks == 0 else None,
            cancel=cancel,
        )
        self._chunks += sum(not chunk.is_pause for chunk in plan.chunks)
        return plan


class Utterance:
    """One request's speech: its text, whole or in pieces (``add``, then ``finish``), planned piece by piece in
    order on a worker thread, its chunks queued on the scheduler as soon as planned and written out as one
    audio stream: ``audio-start``, the chunks as they are made, ``audio-stop`` (then ``synthesize-stopped``
    for a stream), or an ``error`` event in their place from the first failure on."""

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
        self._texts: asyncio.Queue = asyncio.Queue()  # pieces to plan, in order; None at the end
        self._plans: asyncio.Queue = asyncio.Queue()  # ChunkStreams or an error, in order; None at the end
        self._scheduled: list[ChunkStream] = []
        self._cancel = threading.Event()  # stops a plan in progress
        self._planner = asyncio.create_task(self._plan_all())
        self._speaker = asyncio.create_task(self._speak_all())

    def add(self, text: str) -> None:
        """More text; complete sentences go to planning now (all of it, for a request given whole)."""
        limit = self.service.config.max_input_chars
        self.chars += len(text)
        if self.chars > limit:
            raise InvalidInputError(
                f"the text is {self.chars} characters or more; this server takes at most {limit} per request "
                "(--max-input-chars): split it"
            )
        self._queue_text(self.text.add(text) if self.streaming else text)

    def finish(self) -> None:
        self._queue_text(self.text.rest())
        if not self.spoken_text:
            self._plans.put_nowait(InvalidInputError("synthesize has no text: nothing to speak"))
        self._texts.put_nowait(None)

    async def done(self) -> None:
        await asyncio.gather(self._planner, self._speaker, return_exceptions=True)

    def cancel(self) -> None:
        self._cancel.set()
        for task in (self._planner, self._speaker):
            task.cancel()
        for scheduled in self._scheduled:
            scheduled.cancel()

    def _queue_text(self, text: str) -> None:
        if text.strip():
            self.spoken_text = True
            self._texts.put_nowait(text)

    async def _plan_all(self) -> None:
        while (text := await self._texts.get()) is not None:
            try:
                plan = await asyncio.to_thread(self.text.plan, text, self._cancel)
                scheduled = _submit(self.service.scheduler, plan)
            except RequestCancelled:
                return
            except KokoroError as err:
                self._plans.put_nowait(err)
                return
            except Exception as err:  # noqa: BLE001 - a bug: said to the client, its traceback logged
                failure = SynthesisError("planning the text failed")
                failure.__cause__ = err
                self._plans.put_nowait(failure)
                return
            self._scheduled.append(scheduled)
            self._plans.put_nowait(scheduled)
        self._plans.put_nowait(None)

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
                        await self.write(AudioChunk(audio=pcm[at : at + step].tobytes(), **fmt).event())
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
    voice = data.get("voice") or {}
    if not isinstance(voice, dict):
        raise InvalidInputError('the voice of a synthesize event must be an object such as {"name": "af_heart"}')
    name, language = voice.get("name"), voice.get("language")
    for field, value in (("name", name), ("language", language)):
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"the voice {field} must be a string, got {value!r}")
    return name, language


class WyomingHandler(AsyncEventHandler):
    """One client connection: its events answered in order; a streaming request's audio written while the
    rest of its text arrives."""

    def __init__(self, service: WyomingService, reader, writer):
        super().__init__(reader, writer)
        self.service = service
        self._stream: Utterance | None = None  # the synthesize-start ... synthesize-stop in progress
        self._utterances: set[Utterance] = set()

    async def run(self) -> None:
        """As the package's, with bounded reads, an error event for an unreadable event, and the client limit."""
        try:
            if not self.service.admit():
                limit = self.service.config.max_clients
                await self._error(f"the server is busy: {limit} clients are connected (--max-clients)", "Busy")
                return
            try:
                while True:
                    try:
                        event = await read_event(self.reader, self.service.config.max_event_bytes)
                    except BadEvent as err:
                        await self._error(str(err), "BadEvent")
                        break
                    if event is None or not await self.handle_event(event):
                        break
            finally:
                self.service.leave()
        except ConnectionError:
            pass  # the client left
        finally:
            await self.disconnect()
            self.writer.close()

    async def disconnect(self) -> None:
        for utterance in self._utterances:
            utterance.cancel()

    async def _error(self, text: str, code: str) -> None:
        await self.write_event(Error(text=text, code=code).event())

    async def handle_event(self, event: Event) -> bool:
        try:
            await self._handle(event)
        except KokoroError as err:
            log.info("wyoming request refused: %s", err)
            await self._error(str(err), type(err).__name__)
        return True

    async def _handle(self, event: Event) -> None:
        data = event.data
        if Describe.is_type(event.type):
            await self.write_event(self.service.info_event)
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=Ping.from_event(event).text).event())
        elif Synthesize.is_type(event.type):
            if self._stream is not None:
                return  # Home Assistant's copy of a stream's text for servers that cannot stream
            text = data.get("text")
            if not isinstance(text, str):
                raise InvalidInputError("a synthesize event needs its text as a string")
            utterance = self._start(data, streaming=False)
            try:
                utterance.add(text)
            except KokoroError:
                utterance.cancel()
                raise
            utterance.finish()
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
            if stream is None or stream.failed:
                return  # no stream, or it was answered with an error already
            try:
                stream.add(text)
            except KokoroError:
                stream.cancel()
                stream.failed = True
                raise
        elif SynthesizeStop.is_type(event.type):
            stream, self._stream = self._stream, None
            if stream is not None:
                if not stream.failed:
                    stream.finish()
                await self._finish(stream)

    def _start(self, data: dict, *, streaming: bool) -> Utterance:
        voice = self.service.voice_for(*_voice_fields(data))
        utterance = Utterance(self.service, self.write_event, voice, streaming=streaming)
        self._utterances.add(utterance)
        return utterance

    async def _finish(self, utterance: Utterance) -> None:
        try:
            await utterance.done()
        finally:
            self._utterances.discard(utterance)


class WyomingService:
    """What every connection shares: the Speaker, the scheduler its chunks run on, the config, the info."""

    def __init__(self, speaker, scheduler, config: WyomingConfig | None = None):
        self.speaker = speaker
        self.scheduler = scheduler
        self.config = config or WyomingConfig()
        self.info_event = describe().event()
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
