"""The one server builder: the options of `kokoro-tvm serve` -> a checked :class:`Server` -> the app.

`kokoro-tvm serve` and the Ray Serve deployment (``ray_deployment.py``) both build their server here, so an option
reaches both or neither (tests/serve/test_server_builder.py holds the CLI's flags, this builder and the
deployment together). Light on purpose (no web stack): ``server`` checks every option before FastAPI is imported
or a model loads; ``Server.app`` loads the model and builds the app, where it runs (a Ray replica on its node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from inspect import signature

from kokoro_tvm_ext.serve import options
from kokoro_tvm_ext.serve.openai_voices import configured_aliases
from kokoro_tvm_ext.serve.options import MAX_INPUT_CHARS, GuardConfig
from kokoro_tvm_ext.serve.scheduler import MAX_BATCH
from kokoro_tvm_ext.serve.voices import VoiceBook, add_voices_dirs
from kokoro_tvm_ext.speech import FIRST_CHUNK_TOKENS, Speaker, SpeakerConfig


@dataclass(frozen=True)
class Server:
    """Everything an app is built from, checked; plain data that pickles (a Ray driver ships it to its replicas)."""

    speaker: SpeakerConfig  # checked, its lexicon read
    host: str  # where it listens
    guard: GuardConfig
    voices: VoiceBook
    max_input_chars: int
    max_batch: int
    first_chunk_tokens: int
    docs: bool
    voice_tags: bool = True
    voices_dirs: tuple[str, ...] = ()  # registered in the process that builds the app (a Ray replica's too)

    def open_speaker(self):
        """The model loaded and warmed up (the app answers /health once it can synthesize)."""
        speaker = Speaker.open(self.speaker)
        speaker.warm_up()
        return speaker

    def app(self, speaker=None):
        """The FastAPI app on ``speaker`` (None: ``open_speaker()``)."""
        from kokoro_tvm_ext.serve.app import create_app
        from kokoro_tvm_ext.serve.plan import Limits

        add_voices_dirs(self.voices_dirs)
        speaker = speaker or self.open_speaker()
        limits = Limits(
            max_input_chars=self.max_input_chars,
            first_chunk_tokens=self.first_chunk_tokens,
            voice_tags=self.voice_tags,
        )
        return create_app(
            speaker, voices=self.voices, limits=limits, guard=self.guard, max_batch=self.max_batch, docs=self.docs
        )

    def wyoming_beside(self, app, idle_timeout: float):
        """A Wyoming service on ``app``'s model and scheduler (HTTP and Wyoming requests take turns chunk by
        chunk), with this server's input limit, first chunk and request deadline."""
        from kokoro_tvm_ext.serve import wyoming

        config = wyoming.WyomingConfig(
            max_input_chars=self.max_input_chars,
            first_chunk_tokens=self.first_chunk_tokens,
            idle_timeout=idle_timeout,
            synthesis_timeout=self.guard.request_timeout,
        )
        return wyoming.WyomingService(app.state.speaker, app.state.scheduler, config)

    def exposure_warning(self, give_key: str) -> str | None:
        """The warning to print when it listens beyond loopback without a key (``give_key``: how to give one)."""
        return options.exposure_warning(self.guard, self.host, give_key)


def server(
    speaker: SpeakerConfig,
    *,
    host: str = "127.0.0.1",
    allowed_hosts: str | Sequence[str] | None = None,
    api_key: Sequence[str] | None = (),
    api_key_file: Sequence[str] | None = (),
    voice_alias: Sequence[str] | None = (),
    voice_aliases: Sequence[str] | None = (),
    max_input_chars: int = MAX_INPUT_CHARS,
    max_batch: int = MAX_BATCH,
    first_chunk_tokens: int = FIRST_CHUNK_TOKENS,
    docs: bool = False,
    no_voice_tags: bool = False,
    voices_dir: Sequence[str] | None = (),
    as_flags: bool = False,
    **bounds,
) -> Server:
    """The checked server. Each option is `kokoro-tvm serve`'s flag of the same name (``api_key``: the keys,
    ``api_key_file``: files of keys, ``voice_alias``: ``NAME=VOICE`` lines, ``voice_aliases``: files of them,
    ``no_voice_tags``: read ``[voice:]`` and ``[rate:]`` tags as text and refuse ``/dev/dialogue``;
    ``voices_dir``: directories of voice files served by name; None as none, as argparse leaves a repeatable flag
    not given);
    ``bounds``: the request and connection bounds of ``options.BOUNDS``; ``host``: where the server listens, which
    defaults the allowed hosts. ``speaker``: the model, checked here and its lexicon read. A bad value is one
    InvalidInputError naming the option (``--max-batch`` when ``as_flags``, else ``max_batch``)."""
    options.check_count("max_input_chars", max_input_chars, as_flags=as_flags)
    options.check_scheduling(max_batch, first_chunk_tokens, as_flags=as_flags)
    guard = options.guard_config(
        host=host,
        allowed_hosts=allowed_hosts,
        api_keys=api_key or (),
        api_key_files=api_key_file or (),
        as_flags=as_flags,
        **bounds,
    )
    voices_dirs = tuple(str(d) for d in voices_dir or ())
    add_voices_dirs(voices_dirs)  # checked before the model loads; the aliases may name their voices
    aliases, given = configured_aliases(list(voice_alias or ()), list(voice_aliases or ()))
    voices = VoiceBook(aliases)
    voices.check_aliases(given)
    speaker.check(as_flags=as_flags)
    return Server(
        speaker=speaker.with_lexicon_read(),
        host=host,
        guard=guard,
        voices=voices,
        max_input_chars=max_input_chars,
        max_batch=max_batch,
        first_chunk_tokens=first_chunk_tokens,
        docs=bool(docs),
        voice_tags=not no_voice_tags,
        voices_dirs=voices_dirs,
    )


# Every option ``server`` takes, by name: what `kokoro-tvm serve` and the Ray Serve deployment pass on.
OPTIONS = tuple(name for name in signature(server).parameters if name not in ("speaker", "as_flags", "bounds"))
OPTIONS += options.BOUNDS
