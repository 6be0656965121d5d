"""The one text-to-speech pipeline: text (or phonemes) + a voice -> chunks -> synthesis -> speech with word timings.
Its text takes the text path (:mod:`.text_path`: text -> markup -> spans -> sentences -> G2P), then the chunker.

Every front end speaks through :class:`Speaker`: ``say`` (with or without subtitles), ``serve``, ``book`` and
the Python API. A feature added here reaches all of them at once::

    from kokoro_tvm_ext.speech import Speaker

    speaker = Speaker.load()                     # the cached artifact, compiled on first use
    speech = speaker.speak("Bonjour à tous.", "ff_siwis")
    speech.audio, speech.sample_rate, speech.words

    for chunk in speaker.stream(long_text, "af_heart"):   # each chunk as soon as it is made
        play(chunk.audio)

Text may carry inline pronunciations (``[Kokoro](/kˈOkəɹO/)``) and pause tags (``[pause:0.5s]``), see
:mod:`.markup`; a :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon` (``Speaker(..., lexicon=...)``) gives
words' phonemes over the G2P. A pause is a planned chunk of silence, made without the model.

Planning (G2P, chunking, tokens, style rows, noise seeds) is separate from running, so a server can plan
a request before it queues, and batch the chunks of several requests (``SpeechPlan.chunks`` are the model's
inputs). ``SpeechPlan.result`` turns a chunk's model output into a :class:`SpeechChunk` with its word
timings: the one place timings are attached, whoever ran the model.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.model.spec import STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech.cancel import check_cancelled
from kokoro_tvm_ext.speech.chunks import (
    FIRST_CHUNK_TOKENS,
    TEXT_CHUNK_TOKENS,
    Chunk,
    chunk_sentences,
    phoneme_chunks,
)
from kokoro_tvm_ext.speech.config import SpeakerConfig
from kokoro_tvm_ext.speech.edges import GAPS, EdgeCut, edge_cut, joint_after
from kokoro_tvm_ext.speech.languages import BY_CODE, language
from kokoro_tvm_ext.speech.lexicon import Lexicon, load_lexicon
from kokoro_tvm_ext.speech.markup import Aliases, Mark, Pause
from kokoro_tvm_ext.speech.text_checks import clean_text
from kokoro_tvm_ext.speech.text_path import read_text
from kokoro_tvm_ext.speech.timestamps import WordTiming, within, word_timings
from kokoro_tvm_ext.speech.tokens import tokenize
from kokoro_tvm_ext.speech.voices import DEFAULT_VOICE, load_voice, style_for, voice_language
from kokoro_tvm_ext.support.blas_threads import numpy_blas_on_one_thread
from kokoro_tvm_ext.support.errors import InvalidInputError

MIN_SPEED, MAX_SPEED = 0.1, 10.0


@dataclass(frozen=True)
class Voice:
    """A voice pack with the language it speaks: the name or blend as given, its pack [510, 1, 256] and
    the one-letter language code (the first voice's letter unless ``lang`` was given; None for a pack file
    whose name does not tell, which can still speak phonemes)."""

    spec: str
    pack: np.ndarray = field(repr=False)
    lang: str | None

    @classmethod
    def load(cls, spec: str = DEFAULT_VOICE, lang: str | None = None) -> Voice:
        """A name (``af_heart``), a blend (``af_heart:0.6,am_adam:0.4`` or ``af_heart(2)+am_adam(1)``) or a
        ``.npy``/``.pt`` pack; ``lang`` (a code or alias such as ``fr``) overrides the voice's language."""
        pack = load_voice(spec)  # an unknown name is reported before its language
        if lang:
            code = language(lang).code
        else:
            try:
                code = voice_language(spec)
            except InvalidInputError:
                if not _is_pack_file(spec):
                    raise
                code = None  # text needs a language: plan() says to give one
        return cls(spec, pack, code)

    @classmethod
    def silent(cls, name: str, lang: str | None = None) -> Voice:
        """An all-zero pack standing in for a voice where none is needed (warming up, phonemizing), so no pack
        has to be installed; ``lang`` as for ``load``."""
        return cls(name, np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), None).with_lang(lang)

    def with_lang(self, lang: str | None) -> Voice:
        return self if not lang else Voice(self.spec, self.pack, language(lang).code)


@dataclass(frozen=True)
class PlannedChunk:
    """One synthesis call's inputs: what the model takes (tokens, style, speed, seed) and what the
    chunk says (its words, for timings; empty for phoneme input; ``ends_sentence``: a sentence ends with
    it). A pause (``pause_samples`` > 0) is that many samples of silence, with no tokens:
    ``Speaker.synthesize`` makes it without the model."""

    phonemes: str
    tokens: np.ndarray  # int64 ids without the boundary ids
    style: np.ndarray  # float32 [1, 256]
    speed: float
    seed: int
    words: tuple = ()
    pause_samples: int = 0
    ends_sentence: bool = False
    # Seconds of silence kept before its first sound and after its last where the planner cut the text (None:
    # the model's own silence stays): see .edges.
    lead: float | None = None
    tail: float | None = None
    voice: str = ""  # the voice that speaks it (a spec, as the request or its tag named it)
    lang: str | None = None  # the language its words were read in (None: the plan's voice's)
    mark: str | None = None  # a named place (SSML's <mark>): no audio, one timing entry

    @classmethod
    def pause(cls, samples: int, mark: str | None = None) -> PlannedChunk:
        silent = np.zeros((1, STYLE_DIM), np.float32)
        return cls("", np.zeros(0, np.int64), silent, 1.0, 0, (), samples, mark=mark)

    @property
    def is_pause(self) -> bool:
        """Made without the model: silence, or a mark (no samples)."""
        return self.pause_samples > 0 or self.mark is not None

    @property
    def text(self) -> str:
        return Chunk(self.words, self.phonemes).text


@dataclass(frozen=True)
class SpeechChunk:
    """One chunk's audio (float32, ``sample_rate``: the model's, its edges cut as planned), its durations (frames
    per token id incl. both boundary ids), and its word timings in seconds from the start of the whole speech."""

    index: int
    audio: np.ndarray
    durations: np.ndarray
    words: list[WordTiming]
    start: float  # seconds from the start of the whole speech
    text: str
    cut: EdgeCut | None = None  # what of the model's audio ``audio`` is (None: a pause)


@dataclass(frozen=True)
class Speech:
    """Everything a front end writes: the audio, its sample rate and the word timings (seconds from the
    audio's first sample). Speech placed after other speech is ``shifted``; pieces made apart (a book's
    units, on any worker) become one with ``Speech.concat``, which is the only place their times move."""

    audio: np.ndarray
    sample_rate: int
    words: list[WordTiming]

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate

    def shifted(self, seconds: float) -> Speech:
        """The same audio, its word timings ``seconds`` later."""
        return replace(self, words=[w.shifted(seconds) for w in self.words])

    @classmethod
    def concat(cls, parts: Sequence[Speech], sample_rate: int) -> Speech:
        """``parts`` one after another: the audio concatenated, each part's words shifted by the audio before it."""
        audio, words, offset = [], [], 0
        for part in parts:
            if part.sample_rate != sample_rate:
                raise ValueError(f"speech at {part.sample_rate} Hz among speech at {sample_rate} Hz")
            audio.append(part.audio)
            words += part.shifted(offset / sample_rate).words
            offset += len(part.audio)
        return cls(np.concatenate(audio) if audio else np.zeros(0, np.float32), sample_rate, words)


@dataclass
class SpeechPlan:
    """A text's chunks, ready to synthesize. ``result`` attaches timings to a chunk's output; it must be
    called for the chunks in order (each chunk's words start where the previous chunk's audio ended, a
    pause's included)."""

    chunks: list[PlannedChunk]
    voice: Voice
    vocab: dict[str, int]
    sample_rate: int
    _offset: float = 0.0

    def result(self, index: int, audio: np.ndarray, durations: np.ndarray) -> SpeechChunk:
        chunk = self.chunks[index]
        start = self._offset
        cut = None
        if not chunk.is_pause:
            cut = edge_cut(audio, chunk.lead, chunk.tail)
            audio = cut.apply(audio)
        timings = word_timings(chunk.words, durations, self.vocab, sample_rate=self.sample_rate) if chunk.words else []
        if timings:
            timings = within(timings, cut.start / self.sample_rate, len(audio) / self.sample_rate)
        words = [replace(w.shifted(start), voice=chunk.voice or None) for w in timings]
        if chunk.mark is not None:
            words = [WordTiming("", start, start, space_after=False, mark=chunk.mark)]
        if words and chunk.ends_sentence:
            words[-1] = replace(words[-1], sentence_end=True)  # subtitles' cues end there
        spaced = words and chunk.mark is None and index < len(self.chunks) - 1
        if spaced and (lang := chunk.lang or self.voice.lang) and BY_CODE[lang].spaced:
            # A chunk ends at a space of the text (a sentence, a clause, a pause): keep it for subtitles' text.
            words[-1] = replace(words[-1], space_after=True)
        self._offset += len(audio) / self.sample_rate
        return SpeechChunk(index, audio, durations, words, start, chunk.text, cut)


class Speaker:
    """A loaded model plus everything between text and its input: voices, G2P, chunking, timings.

    ``model`` is anything with ``iter_batch(tokens_list, styles, speeds, seeds)`` yielding ``(audio,
    durations)`` per item, ``sample_rate`` and ``max_tokens``: the compiled artifact (``KokoroTVM``) or
    the PyTorch reference (``model.adapters.reference.TorchKokoro``). Thread-safe as the model is."""

    def __init__(
        self,
        model,
        *,
        vocab: dict[str, int] | None = None,
        voice_cache: int = 16,
        lexicon: Lexicon | str | Path | None = None,
    ):
        """``lexicon``: a :class:`~kokoro_tvm_ext.speech.lexicon.Lexicon` or the path of a lexicon file,
        whose words are spoken with its phonemes in every plan (unless a plan names its own)."""
        numpy_blas_on_one_thread()  # the tagger's products would otherwise take a core from the model's kernels
        self.model = model
        self.vocab = vocab if vocab is not None else load_config()["vocab"]
        self.lexicon = load_lexicon(lexicon, self.vocab)
        self.sample_rate = int(model.sample_rate)
        self.max_tokens = int(model.max_tokens)
        self._voices: OrderedDict[tuple[str, str | None], Voice] = OrderedDict()
        self._voice_cache = voice_cache
        self._voices_lock = threading.Lock()  # a server plans requests on several threads

    @classmethod
    def open(cls, config: SpeakerConfig | None = None, *, quiet: bool = False) -> Speaker:
        """The Speaker a :class:`~kokoro_tvm_ext.speech.config.SpeakerConfig` describes (default: the cached
        artifact of the default weights): every front end opens its Speaker here. Every value is checked and
        the lexicon read before anything slow; on first use the weights are bound to a cached compiled library
        (seconds), or compiled if there is none. ``quiet``: no progress lines."""
        config = config if config is not None else SpeakerConfig()
        lexicon = config.read_lexicon()  # the user's file first: what they edit most
        config.check()
        return cls(config.open_model(quiet=quiet), lexicon=lexicon)

    @classmethod
    def load(
        cls,
        artifact: str | Path | None = None,
        *,
        weights: str | Path | None = None,
        precision: str = "fp32",
        threads: int | None = None,
        quiet: bool = False,
        lexicon: Lexicon | str | Path | None = None,
    ) -> Speaker:
        """``Speaker.open`` with the config's fields as arguments: the artifact in ``artifact``, or the cached
        one for ``weights`` (a ``.safetensors`` or ``.pth`` checkpoint; default: the HuggingFace cache, else the
        offline rebuild) in ``precision``."""
        config = SpeakerConfig(
            artifact=artifact, weights=weights, precision=precision, threads=threads, lexicon=lexicon
        )
        return cls.open(config, quiet=quiet)

    # -- voices ------------------------------------------------------------------------------
    def voice(self, voice: str | Voice = DEFAULT_VOICE, lang: str | None = None) -> Voice:
        """A :class:`Voice` (kept for the next request), with ``lang`` overriding its language."""
        if isinstance(voice, Voice):
            return voice.with_lang(lang)
        key = (voice, lang)
        with self._voices_lock:
            if key in self._voices:
                self._voices.move_to_end(key)
                return self._voices[key]
        loaded = Voice.load(voice, lang)
        with self._voices_lock:
            self._voices[key] = loaded
            while len(self._voices) > self._voice_cache:
                self._voices.popitem(last=False)
        return loaded

    def warm_up(self) -> None:
        """Load the English G2P and start the thread pools with one short synthesis (before serving). A silent
        style stands in for a voice, so a server starts (and reports a missing voice pack per request) without
        any pack installed."""
        list(self.stream("Hello.", Voice.silent("warm-up", "a"), speed=MAX_SPEED))

    # -- planning ------------------------------------------------------------------------------
    def plan(
        self,
        text: str | None = None,
        voice: str | Voice = DEFAULT_VOICE,
        *,
        phonemes: str | None = None,
        lang: str | None = None,
        speed: float = 1.0,
        seed: int = 0,
        chunk_seeds: Callable[[int], int] | None = None,
        first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
        cancel: threading.Event | None = None,
        lexicon: Lexicon | None = None,
        pack_sentences: bool | None = None,
        aliases: Aliases | None = None,
        tags: bool = True,
        ssml: bool | None = None,
        after_sentence: bool = False,
        continues: bool = False,
    ) -> SpeechPlan:
        """Text (or ``phonemes``) -> its chunks, by the one chunking policy (:mod:`.chunks`): sentences cut
        before G2P (a blank line, so a heading, always ends one), one sentence per chunk of at most
        :data:`~.chunks.TEXT_CHUNK_TOKENS` tokens (phonemes: one call when they fit the model's ``max_tokens``),
        and the speech's first chunk cut after its first clause and at most ``first_chunk_tokens`` tokens
        (whole words) so its audio comes early (0: the whole first clause; None: no cut, for a plan that
        continues a speech). Chunk ``i`` gets noise seed ``seed + i``, or
        ``chunk_seeds(i)``. Every input error is raised here, before any synthesis. ``cancel``: an event a
        server sets when its client leaves; planning checks it between sentences (and inside long G2P loops)
        and raises :class:`~kokoro_tvm_ext.support.errors.RequestCancelled` once it is set. ``pack_sentences`` is
        deprecated and ignored: every front end speaks one sentence per chunk.

        Text markup: ``[word](/phonemes/)`` speaks the word with those phonemes; ``[pause:0.5s]`` is a chunk
        of silence there (it ends the chunk before it, and takes no noise seed: the chunks around it get the
        seeds they would get without it). ``lexicon`` replaces the speaker's for this plan.

        Voices, languages and rates (:mod:`.markup`): ``[voice:NAME]`` speaks what follows in NAME (``aliases``:
        names for voice specs, ``{"voice":..., "rate":...}`` too; ``tags=False`` reads the tags as text),
        with its language's G2P (every voice with ``lang``'s, when it is given); ``[rate:X]`` multiplies
        ``speed`` by X (clamped to the allowed speeds). A ``<speak>`` document is SSML (:mod:`.ssml`; ``ssml``
        True/False insists). Each chunk has its voice's style, its speed and its seed by its place, so a
        sentence switched to voice V is what V gives there.

        Where the text is cut between two chunks of a paragraph, their edges keep the pause the cut calls for
        (:mod:`.edges`). A stream's pieces, planned apart, join as the whole text's chunks: ``after_sentence``, the
        text goes on right after a sentence of the same paragraph; ``continues``, more of its paragraph follows."""
        if pack_sentences is not None:
            warnings.warn(
                "Speaker.plan(pack_sentences=...) is deprecated and ignored: every front end speaks one sentence "
                "per chunk",
                DeprecationWarning,
                stacklevel=2,
            )
        check_cancelled(cancel)
        speed = _check_speed(speed)
        voice = self.voice(voice, lang)
        if (text is None) == (phonemes is None):
            raise InvalidInputError("give either text or phonemes, not both" if text else "nothing to speak")
        if phonemes is not None:
            if not isinstance(phonemes, str) or not phonemes.strip():
                raise InvalidInputError("phonemes are empty")
            chunked = phoneme_chunks(
                phonemes, self.vocab, max_tokens=self.max_tokens, first_chunk_tokens=first_chunk_tokens
            )
            pieces: list[Chunk | Pause] = [replace(c, words=()) for c in chunked]  # phonemes have no word timings
        else:
            if voice.lang is None:
                voice_language(voice.spec)  # raises: the language cannot be told from the name, give it
            # The text path (clean -> markup -> spans -> sentences -> G2P), then the chunker.
            sentences = read_text(
                text,
                voice.lang,
                vocab=self.vocab,
                lexicon=lexicon if lexicon is not None else self.lexicon,
                cancel=cancel,
                aliases=aliases,
                tags=tags,
                ssml=ssml,
                voice_langs=not lang,
            )
            pieces = chunk_sentences(
                sentences,
                self.vocab,
                max_tokens=min(self.max_tokens, TEXT_CHUNK_TOKENS),
                first_chunk_tokens=first_chunk_tokens,
            )
        edges = _edge_silences(pieces, after_sentence, continues)
        seeds = chunk_seeds or (lambda i: seed + i)
        tokenize("".join(p.phonemes for p in pieces if isinstance(p, Chunk)), self.vocab)  # one warning in all
        chunks = []
        spoken = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # not once more per chunk
            for piece in pieces:
                check_cancelled(cancel)
                if isinstance(piece, Mark):
                    chunks.append(PlannedChunk.pause(0, mark=piece.name))
                    continue
                if isinstance(piece, Pause):
                    chunks.append(PlannedChunk.pause(piece.samples(self.sample_rate)))
                    continue
                tokens = np.array(tokenize(piece.phonemes, self.vocab), np.int64)
                if tokens.size:
                    speaking = voice if piece.voice is None else self.voice(piece.voice)
                    style = style_for(speaking.pack, tokens.size)
                    pace = scaled_speed(speed, piece.rate)
                    seed_i = seeds(spoken)
                    lead, tail = edges[id(piece)]
                    chunks.append(
                        PlannedChunk(
                            piece.phonemes,
                            tokens,
                            style,
                            pace,
                            seed_i,
                            piece.words,
                            0,
                            piece.ends_sentence,
                            lead,
                            tail,
                            speaking.spec,
                            piece.lang,
                        )
                    )
                    spoken += 1
        if not chunks:
            if phonemes is not None:
                raise InvalidInputError(f"nothing to speak: no known phonemes in {phonemes[:40]!r}")
            raise InvalidInputError(
                f"text has nothing to pronounce in {language(voice.lang).name}: {clean_text(text)[:40]!r} "
                "(is it in another language? choose one with --lang or a voice of that language)"
            )
        return SpeechPlan(chunks, voice, self.vocab, self.sample_rate)

    # -- synthesis -------------------------------------------------------------------------------
    def synthesize(self, chunks: Sequence[PlannedChunk]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(audio, durations)`` of each planned chunk, in order, each as soon as it is made; chunks of one plan
        or of several (the server batches requests' first chunks). Their text stages run batched; each chunk
        equals its solo run. A pause is its zeros (and no durations), without the model."""
        spoken = [p for p in chunks if not p.is_pause]
        if len(spoken) == len(chunks):
            return self._model_batch(spoken)
        return self._with_pauses(chunks, self._model_batch(spoken) if spoken else iter(()))

    def _model_batch(self, chunks: Sequence[PlannedChunk]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.model.iter_batch(
            [p.tokens for p in chunks], [p.style for p in chunks], [p.speed for p in chunks], [p.seed for p in chunks]
        )

    @staticmethod
    def _with_pauses(chunks: Sequence[PlannedChunk], spoken: Iterator) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for chunk in chunks:  # the spoken ones stay one batch, in one iterator; pauses go between in order
            if chunk.is_pause:
                yield np.zeros(chunk.pause_samples, np.float32), np.zeros(0, np.int64)
            else:
                yield next(spoken)

    def run(self, plan: SpeechPlan) -> Iterator[SpeechChunk]:
        """The plan's chunks with their word timings, each as soon as its audio is made."""
        for index, (audio, durations) in enumerate(self.synthesize(plan.chunks)):
            yield plan.result(index, audio, durations)

    def stream(self, text: str | None = None, voice: str | Voice = DEFAULT_VOICE, **options) -> Iterator[SpeechChunk]:
        """``plan`` then ``run``: chunks as they are made (``options`` as for ``plan``)."""
        return self.run(self.plan(text, voice, **options))

    def speak(self, text: str | None = None, voice: str | Voice = DEFAULT_VOICE, **options) -> Speech:
        """The whole speech of ``text`` (or ``phonemes=``) in ``voice``, with its word timings."""
        chunks = list(self.run(self.plan(text, voice, **options)))
        return join(chunks, self.sample_rate)


def _edge_silences(
    pieces: Sequence[Chunk | Pause], after_sentence: bool, continues: bool
) -> dict[int, tuple[float | None, float | None]]:
    """Each chunk's (lead, tail) silences, by ``id`` (.edges): half the pause of the cut on each side of a cut
    between two chunks of one paragraph (a clause's or a sentence's), the model's own (None) elsewhere: the speech's
    ends, a paragraph's, a pause tag's. ``after_sentence`` / ``continues``: this text goes on a speech right after a
    sentence of the same paragraph / the speech goes on after it in the same paragraph (a stream's pieces)."""
    spoken = [p for p in pieces if not isinstance(p, Mark)]  # a mark is a place in the text, no sound
    edges = {}
    for i, piece in enumerate(spoken):
        if not isinstance(piece, Chunk):
            continue
        before = spoken[i - 1] if i else None
        after = spoken[i + 1] if i + 1 < len(spoken) else None
        if isinstance(before, Chunk):
            lead = _half_gap(joint_after(before.ends_sentence, before.paragraph == piece.paragraph))
        else:
            lead = _half_gap("sentence" if before is None and after_sentence else None)
        if isinstance(after, Chunk):
            tail = _half_gap(joint_after(piece.ends_sentence, piece.paragraph == after.paragraph))
        else:
            tail = _half_gap(joint_after(piece.ends_sentence, True) if after is None and continues else None)
        edges[id(piece)] = (lead, tail)
    return edges


def _half_gap(joint: str | None) -> float | None:
    return None if joint is None else GAPS[joint] / 2


def join(chunks: Sequence[SpeechChunk], sample_rate: int) -> Speech:
    """Streamed chunks -> one :class:`Speech` (the same audio and timings as ``speak``)."""
    audio = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
    return Speech(audio, sample_rate, [w for c in chunks for w in c.words])


def _is_pack_file(spec) -> bool:
    return isinstance(spec, str) and spec.strip().endswith((".npy", ".pt"))


def scaled_speed(speed: float, rate: float) -> float:
    """``speed`` times a rate (a ``[rate:]`` tag's, an alias's), clamped to the speeds the model takes."""
    return min(max(speed * rate, MIN_SPEED), MAX_SPEED)


def _check_speed(speed) -> float:
    try:
        value = float(speed)
    except (TypeError, ValueError):
        raise InvalidInputError(f"speed must be a number, got {speed!r}") from None
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise InvalidInputError(f"speed must be between {MIN_SPEED:g} and {MAX_SPEED:g}, got {speed}")
    return value
