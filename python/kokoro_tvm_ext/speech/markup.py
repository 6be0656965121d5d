"""Inline markup in the text: pronunciation overrides and pause tags, read once for every front end. The text
path's first stage: text -> :class:`Span` s (runs of text read one way) and the :class:`Pause` s between them,
which the sentence splitter (:mod:`.sentences`) consumes.

* ``[Kokoro](/kˈOkəɹO/)``: the written word(s) in brackets are spoken with exactly the phonemes between the
  slashes (misaki's syntax), in every language; the word keeps its own timing entry under its written text.
* ``[pause:0.5s]``, ``[pause:500ms]``, ``[pause:1]`` (seconds): that much silence at that place, up to
  :data:`MAX_PAUSE_SECONDS`. It ends the chunk before it.
* ``[voice:NAME]`` (Kokoro-FastAPI's tag): what follows is read by NAME (a voice, a blend in either syntax, or an
  alias the caller gives, OpenAI's voice names among them), with the G2P of that voice's language; ``[rate:X]``
  scales the pace by X (on top of the request's speed) until the next rate or voice tag. An alias may carry its
  own rate (``{"voice": "bm_george", "rate": 0.9}``). Either tag ends the chunk before it; text before the first
  voice tag is read by the request's voice. At most :data:`MAX_SWITCHES` of them in one text.

Other brackets (``[sic]``, ``[1]``) stay text. A malformed pause tag, or override phonemes outside Kokoro's
phoneme set, is an :class:`~kokoro_tvm_ext.support.errors.InvalidInputError` naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from kokoro_tvm_ext.speech.tokens import default_vocab
from kokoro_tvm_ext.speech.voices import voice_language
from kokoro_tvm_ext.support.errors import InvalidInputError

MAX_PAUSE_SECONDS = 10.0
MAX_SWITCHES = 10_000  # voice, rate and language changes in one text: a dialogue has far fewer
MIN_RATE, MAX_RATE = 0.1, 10.0  # a rate tag's factor; the speed it gives is clamped to the Speaker's range

# An override (group 1: the written words, 2: the phonemes), a pause tag (group 3: its length), a voice tag
# (4: the name) or a rate tag (5: the factor). Phonemes hold no slash, bracket or parenthesis: misaki's English
# G2P, which reads the override itself, would end the link at a ')'.
_MARKUP = re.compile(
    r"\[([^\[\]]+)\]\(/([^/()\[\]]*)/\)|\[pause:([^\[\]]*)\]|\[voice:([^\[\]]*)\]|\[rate:([^\[\]]*)\]",
    re.IGNORECASE,
)
_LENGTH = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|sec|secs|seconds?)?", re.IGNORECASE)


@dataclass(frozen=True)
class Override:
    """Written words with the phonemes to speak them with (from the inline syntax or a lexicon)."""

    text: str
    phonemes: str


@dataclass(frozen=True)
class Pause:
    """Silence of ``seconds`` at its place; ``tag`` as written, for messages."""

    seconds: float
    tag: str

    def samples(self, sample_rate: int) -> int:
        return round(self.seconds * sample_rate)


@dataclass(frozen=True)
class Mark(Pause):
    """A named place in the text (SSML's ``<mark name>``): no silence, its time reported among the word timings
    (a :class:`~kokoro_tvm_ext.speech.timestamps.WordTiming` whose ``mark`` is its name). It travels the text
    path as a pause of no length does, so inside a sentence it ends the chunk before it."""

    name: str = ""


@dataclass(frozen=True)
class VoiceTag:
    """``[voice:NAME]`` as written: NAME is resolved (aliases) when spans are made."""

    name: str
    tag: str


@dataclass(frozen=True)
class RateTag:
    """``[rate:X]``: the pace factor X until the next rate or voice tag."""

    rate: float
    tag: str


Segment = str | Override | Pause | VoiceTag | RateTag


@dataclass(frozen=True)
class Span:
    """A run of text read one way: what is written in it (plain text and overrides, in order), the language
    (a one-letter code) whose G2P reads it, the voice that speaks it (a voice spec, aliases resolved; None: the
    request's voice) and its rate (a factor on the request's speed). The stages after markup carry spans whole
    or cut (``replace``), never made anew, so what a span says about its text reaches the G2P and the chunks."""

    segments: tuple[str | Override, ...]
    lang: str
    voice: str | None = None
    rate: float = 1.0

    @property
    def written(self) -> str:
        return written_text(self.segments)

    @property
    def has_words(self) -> bool:
        return any(isinstance(s, Override) or s.strip() for s in self.segments)


Aliases = Mapping[str, "str | Mapping[str, object]"]


def resolve_voice(name: str, aliases: Aliases | None = None, where: str = "") -> tuple[str, str | None, float | None]:
    """A voice tag's NAME -> ``(voice spec, its language code or None, the alias's rate or None)``: an alias (a
    voice spec, or ``{"voice": spec, "rate": x}`` as Kokoro-FastAPI's ``voice_aliases``) or a voice spec as written.
    The spec's syntax and language are checked here (None: a pack file whose name does not tell); whether its packs
    exist, when the Speaker loads it."""
    where = where or f"the voice {name!r}"
    key = name.strip()
    if not key:
        raise InvalidInputError(f"{where} names no voice: write [voice:af_heart]")
    value = (aliases or {}).get(key, key)
    rate = None
    if isinstance(value, Mapping):
        if not isinstance(value.get("voice"), str):
            raise InvalidInputError(f'the voice alias {key!r} has no "voice" (write {{"voice": "af_heart"}})')
        rate = None if value.get("rate") is None else check_rate(value["rate"], f"the voice alias {key!r}")
        value = value["voice"]
    if not isinstance(value, str):
        raise InvalidInputError(f'the voice alias {key!r} must be a voice name or {{"voice": ..., "rate": ...}}')
    try:
        lang = voice_language(value)
    except InvalidInputError as err:
        if not value.strip().endswith((".npy", ".pt")):
            raise type(err)(f"{where}: {err}") from None
        lang = None  # a pack file whose name does not tell: it reads the request's language
    return value.strip(), lang, rate


def check_aliases(aliases, where: str) -> dict:
    """Voice aliases as Kokoro-FastAPI's ``voice_aliases`` (name -> voice spec, or ``{"voice": spec, "rate": x}``),
    each checked (syntax and language; packs when spoken); InvalidInputError naming ``where`` and the alias."""
    if not isinstance(aliases, Mapping):
        raise InvalidInputError(f'{where} must be an object of name -> voice (or {{"voice": ..., "rate": ...}})')
    for name in aliases:
        if not isinstance(name, str) or not _ALIAS_NAME.fullmatch(name):
            raise InvalidInputError(f"{where}: the alias name {name!r} must be letters, digits, '_', '.' or '-'")
        resolve_voice(name, aliases, f"{where}: the alias {name!r}")
    return dict(aliases)


_ALIAS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def check_rate(value, where: str) -> float:
    """A rate factor (a number or its text, ``x`` suffix allowed) between MIN_RATE and MAX_RATE."""
    try:
        rate = float(value.strip().rstrip("xX") if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{where} has no rate: write a factor such as [rate:1.2]") from None
    if not (math.isfinite(rate) and MIN_RATE <= rate <= MAX_RATE):
        raise InvalidInputError(f"{where}: the rate must be between {MIN_RATE:g} and {MAX_RATE:g}, got {value}")
    return rate


class SpanWriter:
    """Spans made in order from text, overrides, pauses and changes of reading (voice, language, rate): the
    one place spans are made, for inline tags and SSML alike. A change ends the span before it; at most
    :data:`MAX_SWITCHES` changes."""

    def __init__(self, lang: str):
        self.lang = lang
        self.reading: tuple[str | None, str, float] = (None, lang, 1.0)
        self.items: list[Span | Pause] = []
        self.run: list[str | Override] = []
        self.switches = 0

    def read_as(self, voice: str | None, lang: str, rate: float) -> None:
        if (voice, lang, rate) == self.reading:
            return
        self.switches += 1
        if self.switches > MAX_SWITCHES:
            raise InvalidInputError(f"the text changes voice, language or rate more than {MAX_SWITCHES} times")
        self._close()
        self.reading = (voice, lang, rate)

    def add(self, seg: str | Override | Pause) -> None:
        if isinstance(seg, Pause):
            self._close()
            self.items.append(seg)
        elif seg:
            self.run.append(seg)

    def cut(self) -> None:
        """End the span here (SSML's ``<s>``): what follows is another chunk."""
        self._close()

    def spans(self) -> list[Span | Pause]:
        self._close()
        return self.items

    def _close(self) -> None:
        if self.run:
            voice, lang, rate = self.reading
            self.items.append(Span(tuple(self.run), lang, voice, rate))
            self.run = []


def parse_spans(
    text: str,
    lang: str,
    vocab: dict[str, int] | None = None,
    *,
    aliases: Aliases | None = None,
    tags: bool = True,
    voice_langs: bool = True,
) -> list[Span | Pause]:
    """``text`` -> its spans and pauses in order; text before the first voice tag in ``lang`` (a one-letter
    code) by the request's voice, after it in the tag's voice and (``voice_langs``; False: a language was given
    for the request, and every voice reads in it) its language. ``vocab`` as for :func:`parse_markup`;
    ``aliases``: names a voice tag may use (see :func:`resolve_voice`); ``tags=False``: voice and rate tags are
    left as text (a server that turned them off). A rate tag scales the voice's own pace (an alias's rate)."""
    writer = SpanWriter(lang)
    voice: str | None = None
    voice_lang, pace = lang, 1.0
    segments = parse_markup(text, vocab, tags=tags)
    if sum(isinstance(seg, (VoiceTag, RateTag)) for seg in segments) > MAX_SWITCHES:  # before resolving them
        raise InvalidInputError(f"the text changes voice, language or rate more than {MAX_SWITCHES} times")
    for seg in segments:
        if isinstance(seg, VoiceTag):
            voice, tag_lang, rate = resolve_voice(seg.name, aliases, f"the voice tag {seg.tag}")
            voice_lang = tag_lang if voice_langs and tag_lang else lang
            pace = 1.0 if rate is None else rate
            writer.read_as(voice, voice_lang, pace)
        elif isinstance(seg, RateTag):
            writer.read_as(voice, voice_lang, pace * seg.rate)
        else:
            writer.add(seg)
    return writer.spans()


def segments_of(spans: Iterable[Span | Pause]) -> list[str | Override | Pause]:
    """Spans and pauses -> the segments they hold, in order (the text as :func:`parse_markup` reads it)."""
    return [seg for item in spans for seg in (item.segments if isinstance(item, Span) else (item,))]


def parse_markup(text: str, vocab: dict[str, int] | None = None, *, tags: bool = True) -> list[Segment]:
    """``text`` -> its pieces in order: plain text (str), :class:`Override`, :class:`Pause`, and (unless
    ``tags`` is False, when they stay text) :class:`VoiceTag` and :class:`RateTag`. ``vocab``: the phoneme set
    overrides are checked against (default: Kokoro-82M's)."""
    out: list[Segment] = []
    end = 0
    for m in _MARKUP.finditer(text):
        if not tags and (m.group(4) is not None or m.group(5) is not None):
            continue
        if m.start() > end:
            out.append(text[end : m.start()])
        end = m.end()
        if m.group(3) is not None:
            out.append(Pause(pause_seconds(m.group(3), f"the pause tag {m.group()}"), m.group()))
            continue
        if m.group(4) is not None:
            out.append(VoiceTag(m.group(4), m.group()))
            continue
        if m.group(5) is not None:
            out.append(RateTag(check_rate(m.group(5), f"the rate tag {m.group()}"), m.group()))
            continue
        written = " ".join(m.group(1).split())
        if not written:
            raise InvalidInputError(f"the override {m.group()} has no word in its brackets: write [word](/phonemes/)")
        out.append(Override(written, check_phonemes(m.group(2), vocab, f"the override {m.group()}")))
    if end < len(text):
        out.append(text[end:])
    return out


def pause_seconds(
    length: str, where: str, hint: str = "write [pause:0.5s], [pause:500ms] or [pause:1] (seconds)"
) -> float:
    """A pause's length (``0.5s``, ``500ms``, ``1``: seconds) in seconds, at most MAX_PAUSE_SECONDS;
    InvalidInputError naming ``where`` otherwise."""
    m = _LENGTH.fullmatch(length.strip())
    if m is None:
        raise InvalidInputError(f"{where} has no length: {hint}")
    seconds = float(m.group(1)) / (1000 if (m.group(2) or "").lower() == "ms" else 1)
    if not 0 < seconds <= MAX_PAUSE_SECONDS:
        raise InvalidInputError(f"{where} must be longer than 0 and at most {MAX_PAUSE_SECONDS:g} s")
    return seconds


def check_phonemes(phonemes: str, vocab: dict[str, int] | None, where: str) -> str:
    """``phonemes`` with whitespace collapsed; InvalidInputError naming ``where`` and every character that is
    not one of Kokoro's phonemes (or when there is none)."""
    if vocab is None:
        vocab = default_vocab()
    phonemes = " ".join(phonemes.split())
    if not phonemes:
        raise InvalidInputError(f"{where} has no phonemes")
    unknown = sorted({c for c in phonemes if c not in vocab and c != " "})
    if unknown:
        listed = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in unknown)
        raise InvalidInputError(
            f"{where} has characters that are not Kokoro phonemes: {listed} (see docs/pronunciation.md for the set)"
        )
    return phonemes


def markup_tags(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, str]]:
    """``(start, end, written)`` of each override and pause tag in ``text[start:end]``, found as
    :func:`parse_markup` finds them but unchecked: an override's written words, a pause's single space."""
    for m in _MARKUP.finditer(text, start, len(text) if end is None else end):
        yield m.start(), m.end(), " " if m.group(1) is None else " ".join(m.group(1).split())


# Quoted speech in each language's quotation marks: “…” (English), „…“ (German), «…» (French, Spanish, ...),
# 「…」 (Japanese), ‘…’ (its closing mark not inside a word: don’t), "…".
_QUOTED = re.compile(r'“[^”]*”|„[^“”]*[“”]|«[^»]*»|「[^」]*」|‘(?:[^’]|’(?=\w))*’(?!\w)|"[^"\n]*"')


def voice_quotes(text: str, voice: str, narrator: str) -> str:
    """``text`` with its quoted speech read by ``voice`` and the rest by ``narrator``, written as voice tags
    (``book --dialogue-voice``): ``“Hi,” she said.`` -> ``[voice:V]“Hi,”[voice:N] she said.``."""
    return _QUOTED.sub(lambda m: f"[voice:{voice}]{m.group()}[voice:{narrator}]", text)


def reading_tags(text: str, tags: str = "") -> str:
    """The voice and rate tags in force at the end of ``text`` (``tags``: those in force at its start), written as
    tags: what a text arriving in pieces puts before its next piece, so each piece is read as in the whole."""
    for m in _MARKUP.finditer(text):
        if m.group(4) is not None:
            tags = m.group()
        elif m.group(5) is not None:
            voice = _MARKUP.match(tags) if tags else None
            tags = (voice.group() if voice and voice.group(4) is not None else "") + m.group()
    return tags


# What more text could still make markup: a "[" not closed yet, or an override whose link is not finished.
_UNFINISHED = re.compile(r"\[(?:[^\[\]]*|[^\[\]]+\](?:\((?:/[^/()\[\]]*/?)?)?)\Z")


def unfinished_markup(text: str, start: int = 0) -> int | None:
    """Where, in ``text[start:]``, markup begins that more text could still complete (its ``[``), or None:
    text arriving in pieces must not be cut inside it."""
    at = text.rfind("[", start)
    return at if at >= 0 and _UNFINISHED.match(text, at) else None


def written_text(segments: Iterable[Segment]) -> str:
    """The text as written without markup: overrides by their words, pauses by a space."""
    return "".join(
        s if isinstance(s, str) else s.text if isinstance(s, Override) else " " if isinstance(s, Pause) else ""
        for s in segments
    )
