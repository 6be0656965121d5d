"""SSML 1.1 documents -> the spans inline markup makes (:class:`~kokoro_tvm_ext.speech.markup.SpanWriter`), so a
``<speak>`` document and the same switches written as tags give the same chunks and the same samples.

The document is read by the standard library's expat through defusedxml with DTDs, entity declarations and
external references refused, at most :data:`MAX_CHARS` characters, :data:`MAX_DEPTH` levels and
:data:`MAX_ELEMENTS` elements; nothing is fetched (``<audio src>`` and ``<lexicon uri>`` are never read). Every
problem is one :class:`~kokoro_tvm_ext.support.errors.InvalidInputError` naming the element and its line.

What each element does (docs/markup.md has the table, with Kokoro-FastAPI's behaviour beside it):

* ``<speak xml:lang>``, ``<lang xml:lang>``: the text inside is read by that language's G2P (the voice stays);
* ``<p>`` ends a paragraph (a blank line), ``<s>`` ends the chunk (and its sentence, when the text does not);
* ``<break time|strength>``: a pause (``[pause:]``); ``<prosody rate>``: the rate (``[rate:]``), named rates
  and percentages multiplied into the enclosing rate; its ``pitch``, ``volume`` and ``contour`` are ignored,
  said in one warning;
* ``<voice name>``: the voice (``[voice:NAME]``: voices, blends, aliases);
* ``<say-as interpret-as>``: ``characters``/``spell-out`` spell the letters, ``cardinal``, ``ordinal``,
  ``digits``, ``date`` (``format`` such as ``mdy``), ``time`` and ``telephone`` are written as words (num2words,
  in the span's language where it has one, else digits for the G2P to read);
* ``<phoneme alphabet="ipa" ph>``: an override (``[word](/ph/)``), checked against Kokoro's phoneme set;
* ``<sub alias>``: the alias is read; ``<mark name>``: a :class:`~kokoro_tvm_ext.speech.markup.Mark`;
* ``<emphasis>``, ``<token>``, ``<w>``, ``<audio>`` (its fallback content): their text, read plainly (Kokoro has
  no input for stress); ``<desc>``, ``<meta>``, ``<metadata>``, ``<lexicon>``: dropped;
* elements of another namespace (``mstts:``, ``amazon:``, ``google:``): their text, the element ignored.
"""

from __future__ import annotations

import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

from kokoro_tvm_ext.speech.languages import language
from kokoro_tvm_ext.speech.markup import (
    MAX_RATE,
    MIN_RATE,
    Aliases,
    Mark,
    Override,
    Pause,
    Span,
    SpanWriter,
    check_phonemes,
    pause_seconds,
    resolve_voice,
)
from kokoro_tvm_ext.support.errors import InputWarning, InvalidInputError

MAX_CHARS = 1_000_000
MAX_DEPTH = 32
MAX_ELEMENTS = 50_000

SSML_NS = "http://www.w3.org/2001/10/synthesis"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_START = re.compile(r"\s*(?:<speak[\s>/]|<\?xml)")
_SPACES = re.compile(r"\s+")
# SSML's named break strengths and rates (SSML leaves the values to the processor: Kokoro-FastAPI's).
_STRENGTHS = {"none": 0.0, "x-weak": 0.0, "weak": 0.25, "medium": 0.5, "strong": 1.0, "x-strong": 1.5}
_RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
_HANDLERS = {
    name: "_" + name.replace("-", "_")
    for name in (
        "p",
        "paragraph",
        "s",
        "sentence",
        "lang",
        "voice",
        "prosody",
        "break",
        "mark",
        "sub",
        "phoneme",
        "say-as",
    )
}
_TRANSPARENT = {"emphasis", "token", "w", "audio", "speak"}
_DROPPED = {"desc", "meta", "metadata", "lexicon", "lookup"}
# num2words' language for each of ours that it writes numbers in.
_NUM2WORDS = {"a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "p": "pt_BR"}
_MONTHS = "January February March April May June July August September October November December".split()


class PitchIgnoredWarning(InputWarning):
    """``<prosody pitch|volume|contour>``: Kokoro has no input for them."""


def is_ssml(text: str) -> bool:
    """Whether ``text`` is an SSML document: it starts with ``<speak`` or an XML declaration."""
    return bool(_START.match(text))


def parse_ssml(
    text: str,
    lang: str,
    vocab: dict[str, int] | None = None,
    *,
    aliases: Aliases | None = None,
    voice_langs: bool = True,
) -> list[Span | Pause]:
    """An SSML document -> its spans, pauses and marks in order; text outside any ``xml:lang`` in ``lang`` (a
    one-letter code) by the request's voice. ``vocab``: the phoneme set ``<phoneme>`` is checked against;
    ``aliases``: names ``<voice name>`` may use; ``voice_langs``: a ``<voice>`` reads in its own language
    (False: in the request's, which was given; ``xml:lang`` still wins)."""
    if len(text) > MAX_CHARS:
        raise InvalidInputError(f"the SSML document is {len(text)} characters; at most {MAX_CHARS} are read")
    root, lines = _parse(text)
    reader = _Reader(lang, vocab, aliases, lines, voice_langs)
    if _local(root.tag) != "speak" or _namespace(root.tag) not in ("", SSML_NS):
        raise InvalidInputError(f"SSML: the document's root is <{_local(root.tag)}> (line 1), not <speak>")
    reader.element(root, (None, lang, 1.0), depth=1)
    if reader.ignored:
        warnings.warn(
            f"SSML: <prosody {'/'.join(sorted(reader.ignored))}> is ignored (Kokoro has no input for it); rate is read",
            PitchIgnoredWarning,
            stacklevel=3,
        )
    return reader.writer.spans()


class _LineRecorder(ET.TreeBuilder):
    """A tree builder that notes each element's line, and the elements still open (for an unclosed one)."""

    def __init__(self):
        super().__init__()
        self.lines: dict[int, int] = {}
        self.open: list[tuple[str, int]] = []
        self.count = 0
        self.expat = None

    def start(self, tag, attrs):
        self.count += 1
        line = self.expat.CurrentLineNumber
        if self.count > MAX_ELEMENTS:
            raise InvalidInputError(f"SSML: more than {MAX_ELEMENTS} elements (line {line})")
        if len(self.open) >= MAX_DEPTH:
            raise InvalidInputError(f"SSML: <{_local(tag)}> on line {line} is nested deeper than {MAX_DEPTH} levels")
        element = super().start(tag, attrs)
        self.lines[id(element)] = line
        self.open.append((_local(tag), line))
        return element

    def end(self, tag):
        self.open.pop()
        return super().end(tag)


def _parse(text: str) -> tuple[ET.Element, dict[int, int]]:
    builder = _LineRecorder()
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    builder.expat = parser.parser
    try:
        parser.feed(text)
        root = parser.close()
    except DTDForbidden:
        raise InvalidInputError("SSML: a document type declaration (<!DOCTYPE>) is refused (line 1)") from None
    except EntitiesForbidden as err:
        raise InvalidInputError(f"SSML: the entity declaration {err.name!r} is refused") from None
    except ExternalReferenceForbidden as err:
        raise InvalidInputError(f"SSML: the external reference {err.sysid!r} is refused") from None
    except ET.ParseError as err:
        line = err.position[0]
        if builder.open and "no element found" in str(err):
            name, opened = builder.open[-1]
            raise InvalidInputError(f"SSML: <{name}> opened on line {opened} is not closed") from None
        where = f" inside <{builder.open[-1][0]}>" if builder.open else ""
        message = str(err).split(":")[0]
        raise InvalidInputError(f"SSML is not well-formed XML{where}: {message} (line {line})") from None
    return root, builder.lines


def _local(tag: str) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _namespace(tag: str) -> str:
    return tag[1:].partition("}")[0] if isinstance(tag, str) and tag.startswith("{") else ""


Reading = tuple  # (voice or None, language code, rate)


class _Reader:
    """Walks the tree once, writing spans as it goes; ``reading`` is the enclosing voice, language and rate."""

    def __init__(self, lang: str, vocab, aliases: Aliases | None, lines: dict[int, int], voice_langs: bool):
        self.writer = SpanWriter(lang)
        self.voice_langs = voice_langs
        self.vocab, self.aliases, self.lines = vocab, aliases, lines
        self.ignored: set[str] = set()

    def where(self, el: ET.Element) -> str:
        return f"<{_local(el.tag)}> on line {self.lines.get(id(el), '?')}"

    def text(self, text: str | None, reading: Reading, layout: bool = True) -> None:
        """``text`` read as ``reading``; its whitespace is the document's layout, one space (``layout=False``:
        whitespace this reader wrote, kept)."""
        if text:
            self.writer.read_as(*reading)
            self.writer.add(_SPACES.sub(" ", text) if layout else text)

    def element(self, el: ET.Element, reading: Reading, depth: int) -> None:
        name, foreign = _local(el.tag), _namespace(el.tag) not in ("", SSML_NS)
        handler: Callable | None = None if foreign else getattr(self, _HANDLERS.get(name, ""), None)
        if foreign or name in _TRANSPARENT:
            if name == "speak" and not foreign and el.get(_XML_LANG):
                reading = (reading[0], self.language(el), reading[2])
            self.children(el, reading, depth)
        elif name in _DROPPED:
            pass
        elif handler is not None:
            handler(el, reading, depth)
        else:
            raise InvalidInputError(f"SSML: {self.where(el)} is not an SSML element this reader knows")

    def children(self, el: ET.Element, reading: Reading, depth: int) -> None:
        self.text(el.text, reading)
        for child in el:
            self.element(child, reading, depth + 1)
            self.text(child.tail, reading)

    def language(self, el: ET.Element) -> str:
        tag = (el.get(_XML_LANG) or "").strip().lower()
        for candidate in (tag, tag.partition("-")[0]):
            try:
                return language(candidate).code
            except InvalidInputError:
                continue
        raise InvalidInputError(f"SSML: {self.where(el)} has xml:lang={tag!r}, not a language Kokoro speaks")

    # -- elements with a meaning ------------------------------------------------------------------
    def _p(self, el, reading, depth):
        self.children(el, reading, depth)
        self.text("\n\n", reading, layout=False)  # a blank line: the paragraph (and its sentence) ends

    _paragraph = _p

    def _s(self, el, reading, depth):
        self.children(el, reading, depth)
        self.writer.cut()

    _sentence = _s

    def _lang(self, el, reading, depth):
        self.children(el, (reading[0], self.language(el), reading[2]), depth)

    def _voice(self, el, reading, depth):
        name = el.get("name")
        if not name:
            raise InvalidInputError(f'SSML: {self.where(el)} has no name (write <voice name="af_heart">)')
        voice, lang, rate = resolve_voice(name, self.aliases, f"SSML: {self.where(el)}")
        lang = self.language(el) if el.get(_XML_LANG) else lang if self.voice_langs and lang else reading[1]
        self.children(el, (voice, lang, 1.0 if rate is None else rate), depth)

    def _prosody(self, el, reading, depth):
        self.ignored |= {key for key in ("pitch", "volume", "contour", "range", "duration") if el.get(key)}
        rate = el.get("rate")
        if rate is not None:
            factor = _rate(rate.strip().lower())
            if factor is None:
                raise InvalidInputError(
                    f"SSML: {self.where(el)} has rate={rate!r}: write x-slow, slow, medium, fast, x-fast, a "
                    "percentage (120%) or a factor (1.2)"
                )
            reading = (reading[0], reading[1], min(max(reading[2] * factor, MIN_RATE), MAX_RATE))
        self.children(el, reading, depth)

    def _break(self, el, reading, depth):
        time, strength = el.get("time"), el.get("strength")
        if time is not None:
            seconds = pause_seconds(time, f"SSML: {self.where(el)} time={time!r}", 'write time="500ms" or time="1.5s"')
        elif strength is not None:
            if strength not in _STRENGTHS:
                raise InvalidInputError(
                    f"SSML: {self.where(el)} has strength={strength!r}: one of {', '.join(_STRENGTHS)}"
                )
            seconds = _STRENGTHS[strength]
        else:
            seconds = _STRENGTHS["medium"]
        if seconds:
            self.writer.add(Pause(seconds, f"<break> on line {self.lines.get(id(el))}"))

    def _mark(self, el, reading, depth):
        name = el.get("name")
        if not name:
            raise InvalidInputError(f"SSML: {self.where(el)} has no name")
        self.writer.add(Mark(0.0, f"<mark name={name!r}>", name))

    def _sub(self, el, reading, depth):
        alias = el.get("alias")
        if alias is None:
            raise InvalidInputError(f"SSML: {self.where(el)} has no alias")
        self.text(alias, reading)

    def _phoneme(self, el, reading, depth):
        alphabet = (el.get("alphabet") or "ipa").lower()
        if alphabet != "ipa":
            raise InvalidInputError(
                f"SSML: {self.where(el)} has alphabet={alphabet!r}; only ipa (Kokoro's phonemes) is read"
            )
        written = " ".join("".join(el.itertext()).split())
        if not written:
            raise InvalidInputError(f"SSML: {self.where(el)} has no text to say with its phonemes")
        phonemes = check_phonemes(el.get("ph") or "", self.vocab, f"SSML: {self.where(el)}")
        self.writer.read_as(*reading)
        self.writer.add(Override(written, phonemes))

    def _say_as(self, el, reading, depth):
        kind = (el.get("interpret-as") or "").strip().lower()
        written = " ".join("".join(el.itertext()).split())
        try:
            said = _spoken_form(kind, written, el.get("format") or "", reading[1])
        except ValueError as err:
            raise InvalidInputError(f"SSML: {self.where(el)} interpret-as={kind!r}: {err}") from None
        self.text(said, reading)


def _rate(rate: str) -> float | None:
    if rate in _RATES:
        return _RATES[rate]
    try:
        if rate.endswith("%"):
            value = float(rate[:-1])
            return 1 + value / 100 if rate[0] in "+-" else value / 100
        return float(rate)
    except ValueError:
        return None


# -- say-as -----------------------------------------------------------------------------------------
def _spoken_form(kind: str, text: str, form: str, lang: str) -> str:
    """The words ``<say-as interpret-as=kind>`` says ``text`` with (ValueError: a text that is not one)."""
    if kind in ("characters", "spell-out", "verbatim"):
        return " ".join(c.upper() if c.isalpha() else _digit(c, lang) for c in text if c.isalnum())
    if kind == "cardinal":
        return _number(_integer(text), lang, "cardinal")
    if kind == "ordinal":
        return _number(_integer(re.sub(r"(?:st|nd|rd|th|\.|º|ª)$", "", text.strip())), lang, "ordinal")
    if kind == "digits":
        return " ".join(_digit(c, lang) for c in text if c.isdigit())
    if kind == "telephone":
        groups = [g for g in re.split(r"[^0-9+]+", text) if g.strip("+")]
        return ", ".join(" ".join(_digit(c, lang) for c in g if c.isdigit()) for g in groups)
    if kind == "date":
        return _date(text, form.lower() or "mdy", lang)
    if kind == "time":
        return _time(text, lang)
    return text  # an interpret-as we do not know: the text as written


def _integer(text: str) -> int:
    digits = text.replace(",", "").replace(" ", "").strip()
    if not re.fullmatch(r"-?\d{1,15}", digits):
        raise ValueError(f"{text!r} is not a whole number")
    return int(digits)


def _number(value: int, lang: str, to: str) -> str:
    from num2words import num2words  # misaki's dependency; imported when SSML asks for it

    code = _NUM2WORDS.get(lang)
    if code is None:
        return str(value)  # the G2P reads digits in its own language
    try:
        return num2words(value, lang=code, to=to)
    except (NotImplementedError, OverflowError):
        return str(value)


def _digit(c: str, lang: str) -> str:
    return _number(int(c), lang, "cardinal") if c.isdigit() else c


def _date(text: str, form: str, lang: str) -> str:
    parts = [p for p in re.split(r"[-/. ]+", text.strip()) if p]
    fields = [f for f in form if f in "dmy"]
    if len(parts) != len(fields) or not all(p.isdigit() for p in parts):
        raise ValueError(f"{text!r} does not match the format {form!r}")
    got = dict(zip(fields, (int(p) for p in parts)))
    if not 1 <= got.get("m", 1) <= 12 or not 1 <= got.get("d", 1) <= 31:
        raise ValueError(f"{text!r} is not a date in the format {form!r}")
    if _NUM2WORDS.get(lang) != "en":
        return " ".join(parts)  # the G2P reads the numbers in its own language
    words = []
    if "m" in got:
        words.append(_MONTHS[got["m"] - 1])
    if "d" in got:
        words.append(_number(got["d"], lang, "ordinal"))
    if "y" in got:
        from num2words import num2words

        if words:
            words[-1] += ","
        words.append(num2words(got["y"], lang="en", to="year"))
    return " ".join(words)


def _time(text: str, lang: str) -> str:
    m = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([AaPp]\.?[Mm]\.?)?", text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a time (write 14:30 or 2:30pm)")
    hours, minutes = int(m.group(1)), int(m.group(2) or 0)
    if hours > 24 or minutes > 59:
        raise ValueError(f"{text!r} is not a time")
    if _NUM2WORDS.get(lang) != "en":
        return text
    said = [_number(hours, lang, "cardinal")]
    if minutes == 0:
        said.append("o'clock" if not m.group(4) else "")
    else:
        said.append(("oh " if minutes < 10 else "") + _number(minutes, lang, "cardinal"))
    if m.group(4):
        said.append("A M" if m.group(4)[0] in "Aa" else "P M")
    return " ".join(w for w in said if w)
