"""Where a sentence ends, and where a clause does: the one definition every part of the pipeline uses.

The text path's second stage: markup's spans and pauses -> :class:`Sentence` s (:func:`split_spans`), which the G2P
reads one by one, so a sentence's phonemes never depend on the text that came with it. Wyoming finds the complete
sentences of text still arriving (:class:`SentenceBuffer`), subtitles break their cues at them, and the chunker
splits a sentence too long for the model at its clauses.

A sentence ends

* after ``. ! ? …`` (or a run of them) and up to eight closing quotes or brackets ``” ’ " ' ) ] } » ›`` (``»``
  also after a space, as French writes it), once whitespace and then a character that is not a lowercase letter
  follow: ``Wait... What?`` is two sentences, ``Wait... what?`` and ``"Yes!" she said.`` one each;
* but not after an abbreviation written before what it abbreviates: a title of the language (``Dr. Smith``,
  ``Mrs.``, French ``Mme``, Spanish ``Sra.``, ...), a single letter (``A. Tester``, ``J. R. R. Tolkien``), an
  initialism in capitals (``U.S.``), ``e.g.``, ``i.e.``, ``cf.``, ``vs.``, an abbreviation before a number
  (``No. 5``, ``p. 12``), or a number that begins a sentence or a line (a list: ``1. Open the box``). Any other
  word (``etc.``) ends a sentence unless a lowercase word follows. A decimal number (``3.14``, ``$1.50``) or an
  address has no space after its dot;
* in Japanese and Mandarin after ``。！？`` (or ``!?``) and any closing ``」』）”``..., with no space needed; in
  Hindi after the danda ``।`` or ``॥``;
* at a blank line (the end of a paragraph), whatever comes before it.

A piece with no letter or digit (a lone ``...``, ``* * *``) belongs to the sentence after it. Every sentence
keeps the whitespace after it, so the pieces join back into the text exactly. Markup (``[Dr. Smith](/.../)``,
``[pause:1s]``) is read as its written words and never cut inside. Each end is decided by the text before it and
the one character after its whitespace, so text given in pieces is cut exactly as the whole text is; and no
piece is read again but the end still open at its close, so the work is linear in the text however it is cut
(``SentenceBuffer.work`` counts it).

A clause ends at ``, ; : — –`` and ``、，；：``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kokoro_tvm_ext.speech.languages import BY_CODE, resolve_lang
from kokoro_tvm_ext.speech.markup import (
    Override,
    Pause,
    Segment,
    Span,
    markup_tags,
    segments_of,
    unfinished_markup,
)

SENTENCE_MARKS = ".!?…"
CLOSERS = "”’\"')]}»›"
CJK_STOPS = "。！？!?"
CJK_CLOSERS = "」』）〕】〉》" + CLOSERS
DANDAS = "।॥"
CLAUSE_MARKS = ",;:—–、，；："
_OPENERS = "“‘\"'([{«‹¿¡„‚「『（"

# Abbreviations that never end a sentence: those in every Latin-script text, and each language's titles.
_ALWAYS = frozenset({"e.g", "i.e", "cf", "vs", "viz"})
_BEFORE_NUMBERS = frozenset("no nos nr vol vols fig figs p pp ch sec art op núm pág pag".split())
_ENGLISH_TITLES = "mr mrs ms mx dr prof st mt rev fr gen col capt lt sgt maj cmdr adm gov sen rep pres hon messrs"
_TITLES = {
    "a": _ENGLISH_TITLES,
    "b": _ENGLISH_TITLES,
    "e": "sr sra srta sres dr dra prof profa lic ing ud uds dña",
    "f": "mme mmes mlle mlles mm me dr pr st ste mgr",
    "h": "डॉ प्रो " + _ENGLISH_TITLES,  # Hindi text often writes English titles too
    "i": "sig sigg dott prof avv ing arch geom rag",
    "p": "sr sra srta dr dra prof profa eng",
    "j": _ENGLISH_TITLES,  # the Latin words in Japanese or Mandarin text are mostly English
    "z": _ENGLISH_TITLES,
}
_LONGEST_ABBREVIATION = 12  # characters read back from a dot; a longer word is no abbreviation
_INITIALISM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_ALNUM = re.compile(r"[^\W_]")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_NOT_SPACE = re.compile(r"\S")
_LAST_SOLID = re.compile(r"(?s:.*)\S")  # from the back: where the trailing whitespace begins
_PHONEME_RUN = re.compile(r"[^/()\[\]]+")
_SPACES = r" \t\u00a0\u202f\u2009"  # the spaces French puts before a closing » or ›
MAX_CLOSERS = 8  # closing quotes and brackets after a sentence's marks (more: the marks end no sentence)


class _Rules:
    """One language's sentence ends, as regular expressions: ``pattern`` matches a possible end (the marks, the
    closers and the whitespace after them, before a character that proves it); ``proof`` a character that may
    prove one; ``pending`` where, at the end of the text, an end may still begin once more text comes."""

    def __init__(self, titles: str = "", stops: str = "", closers: str = "", read_words: bool = True):
        self.titles = frozenset(titles.split())
        self.read_words = read_words  # False for phonemes: a mark before whitespace always ends a sentence
        # Each alternative starts a run only where the run starts (a run of marks, of stops, of whitespace), and
        # none can go back over what it read, so a long run is read once. French closes a quote after a space
        # (« Oui ! »): a » or › after the space closes the sentence, and proves nothing. The closers after the
        # marks are bounded (MAX_CLOSERS), so an end still open at the end of text arriving in pieces (" »"
        # after " »") is read again at most MAX_CLOSERS times.
        marks = re.escape(SENTENCE_MARKS)
        closed = rf"(?:[{re.escape(CLOSERS)}]|[{_SPACES}]+[»›]){{0,{MAX_CLOSERS}}}"
        alternatives = [rf"(?<![{marks}])(?P<marks>[{marks}]+){closed}\s+(?=[^\s»›])"]
        open_end = rf"{closed}\s*"  # what may follow the marks of an end that more text could still prove
        if stops:  # no space needed after them, so what proves the end is no stop, closer or mark either
            ended = re.escape(stops + closers + SENTENCE_MARKS)
            alternatives.append(
                rf"(?<![{re.escape(stops)}])[{re.escape(stops)}]+[{re.escape(closers)}]*\s*(?=[^\s{ended}])"
            )
            open_end = rf"(?:{open_end}|[{re.escape(closers)}]*\s*)"
        alternatives.append(r"(?<!\s)(?=\s*?\n[ \t\r\f\v]*\n)\s+(?=\S)")  # a blank line
        self.pattern = re.compile("|".join(alternatives))
        # A character that may prove an end: one after whitespace, or one no stop can be followed by.
        self.proof = re.compile(r"\s\S" + (rf"|[^\s{re.escape(stops + closers + SENTENCE_MARKS)}]" if stops else ""))
        # The last run of marks (or stops) if all after it may still become the rest of an end; found from the
        # back (the greedy .* goes to the end once, then back to the first candidate).
        ends = re.escape(SENTENCE_MARKS + stops)
        self.pending = re.compile(rf"(?s:.*)(?<![{ends}])(?=[{ends}]+{open_end}\Z)")


def _language_rules(code: str) -> _Rules:
    if code in ("j", "z"):
        return _Rules(_TITLES[code], CJK_STOPS, CJK_CLOSERS)
    if code == "h":
        return _Rules(_TITLES[code], DANDAS, CLOSERS)
    return _Rules(_TITLES[code])


_RULES = {code: _language_rules(code) for code in BY_CODE}
_PHONEME_RULES = _Rules(read_words=False)


def _rules(lang: str) -> _Rules:
    return _RULES[resolve_lang(lang)]


class _Scanner:
    """The sentence ends of written text given whole or in pieces (``add``, then ``scan``): the same ends either
    way, since each is decided by the text before it and the character that proves it, and a scan resumes
    where a later character could still make an end."""

    def __init__(self, rules: _Rules):
        self.rules = rules
        self.text = ""
        self.ends: list[int] = []  # where each sentence after the first begins
        self._protected: list[tuple[int, int]] = []  # markup: no end strictly inside
        self._scan_from = 0
        self._scanned_to = 0
        self.work = 0  # characters the searches were given: the measure of the cost, linear in the text
        self._piece_start = 0  # the open sentence's start
        self._piece_word: int | None = None  # its first non-space character, once found
        self._piece_alnum = False
        self._alnum_from = 0

    def add(self, written: str, protected: bool = False) -> None:
        if protected and written:
            self._protected.append((len(self.text), len(self.text) + len(written)))
        self.text += written

    def scan(self) -> None:
        text = self.text
        new_text_from, self._scanned_to = self._scanned_to, len(text)
        self.work += len(text) - max(new_text_from - 1, 0)
        if not self.rules.proof.search(text, max(new_text_from - 1, 0)):
            return  # no new character can prove an end: nothing to decide yet (a long run is not read again)
        last = self._scan_from
        self.work += 3 * (len(text) - last)  # the ends, then where the trailing whitespace and an open end begin
        for m in self.rules.pattern.finditer(text, self._scan_from):
            last = m.end()
            if self._is_end(m) and not self._inside_markup(last) and self._sentence_has_alnum(last):
                self.ends.append(last)
                self._piece_start, self._piece_word, self._piece_alnum, self._alnum_from = last, None, False, last
        # The next scan starts where an end may still begin: the trailing whitespace (a blank line, or the
        # space after marks, waiting for the character after it) or the last marks still open. Not earlier,
        # so text that can end nothing any more is never read again.
        solid = _LAST_SOLID.match(text, last)
        self._scan_from = solid.end() if solid else last
        open_end = self.rules.pending.match(text, last)
        if open_end:
            self._scan_from = min(self._scan_from, open_end.end())

    def drop(self, upto: int) -> None:
        """Forget the text before ``upto``, an end (nothing after an end looks back past it)."""
        self.text = self.text[upto:]
        self.ends = [e - upto for e in self.ends if e > upto]
        self._protected = [(s - upto, e - upto) for s, e in self._protected if e > upto]
        self._scan_from -= upto
        self._scanned_to -= upto
        self._piece_start -= upto
        self._alnum_from -= upto
        if self._piece_word is not None:
            self._piece_word -= upto

    def _inside_markup(self, at: int) -> bool:
        i = bisect_left(self._protected, (at,)) - 1
        return i >= 0 and self._protected[i][0] < at < self._protected[i][1]

    def _sentence_has_alnum(self, end: int) -> bool:
        if not self._piece_alnum and _ALNUM.search(self.text, self._alnum_from, end):
            self._piece_alnum = True
        self._alnum_from = end
        return self._piece_alnum

    def _is_end(self, m: re.Match) -> bool:
        if _BLANK_LINE.search(m.group()):
            return True  # a paragraph ends, whatever came before
        marks = m.group("marks")
        if marks is None or not self.rules.read_words:
            return True  # a full-width stop or a danda; or phonemes, which have no abbreviations
        after = self.text[m.end()]
        if after.islower():
            return False
        if marks != ".":
            return True
        return not self._abbreviation(m.start(), after)

    def _abbreviation(self, dot: int, after: str) -> bool:
        """Whether the word before the dot at ``dot`` abbreviates what follows it (``after`` begins that)."""
        text = self.text
        start, limit = dot, max(self._piece_start, dot - _LONGEST_ABBREVIATION)
        while start > limit and not text[start - 1].isspace():
            start -= 1
        if start > self._piece_start and not text[start - 1].isspace():
            return False  # longer than any abbreviation
        word = text[start:dot].lstrip(_OPENERS)
        lower = word.lower()
        if (len(word) == 1 and word.isalpha()) or lower in _ALWAYS or lower in self.rules.titles:
            return True
        if _INITIALISM.fullmatch(word) and word.isupper():
            return True
        if lower in _BEFORE_NUMBERS and after.isdigit():
            return True
        return word.isdigit() and (start == self._first_word() or text[start - 1] == "\n")

    def _first_word(self) -> int:
        if self._piece_word is None:
            self._piece_word = _NOT_SPACE.search(self.text, self._piece_start).start()
        return self._piece_word


class SentenceBuffer:
    """Text arriving in pieces (a Wyoming stream) -> its complete sentences, each as soon as the character after
    it proves it complete, cut exactly as :func:`split_sentences` cuts the whole text. The work per piece is
    proportional to the piece and the sentence still open, not to all the text so far."""

    def __init__(self, lang: str = "a"):
        self._setup(_rules(lang), read_markup=True)

    @classmethod
    def _for_phonemes(cls) -> SentenceBuffer:
        buffer = cls.__new__(cls)
        buffer._setup(_PHONEME_RULES, read_markup=False)
        return buffer

    def _setup(self, rules: _Rules, read_markup: bool, work: int = 0) -> None:
        self._scanner = _Scanner(rules)
        self._read_markup = read_markup
        self._work = work  # besides the scanner's
        self._raw = ""  # the text not given out yet
        self._converted = 0  # how much of it the scanner has (a "[" that may still become markup waits)
        self._open_shape = ""  # that markup's shape (``_markup_shape``), while it waits
        self._written_starts: list[int] = []  # per piece given to the scanner: where it starts there,
        self._raw_starts: list[int] = []  # where it starts in the text, and whether it is markup
        self._markup: list[bool] = []

    def add(self, text: str) -> str:
        """Append ``text``; the text that has become complete sentences since the last call (maybe '')."""
        return "".join(self._push(text, final=False))

    def rest(self) -> str:
        """The text left (the last sentence, ended or not); the buffer is then empty."""
        rest = self._raw
        self._setup(self._scanner.rules, self._read_markup, self.work)
        return rest

    @property
    def work(self) -> int:
        """Characters read so far, by every search: within a small factor of the text given, however it
        was cut into pieces (a Wyoming server's cost per event is bounded by it)."""
        return self._work + self._scanner.work

    def _push(self, text: str, final: bool) -> list[str]:
        before = len(self._raw)
        self._raw += text
        raw, at, end = self._raw, self._converted, len(self._raw)
        if self._read_markup and not final:
            pending = self._open_markup(text, before)
            end = pending if pending is not None else end
            if end == at:
                return []  # more of a markup not finished yet: nothing new to read
        if self._read_markup:
            self._work += end - at
            for start, stop, written in markup_tags(raw, at, end):
                self._feed(raw[at:start], at, markup=False)
                self._feed(written, start, markup=True)
                at = stop
        self._feed(raw[at:end], at, markup=False)
        self._converted = end
        self._scanner.scan()
        return self._take()

    def _open_markup(self, text: str, before: int) -> int | None:
        """Where markup that more text could still complete begins (its ``[``), or None, with ``text`` just
        added at ``before``. Only the last ``[`` can begin one, and a markup waiting already is known by its
        shape, so the markup is never read again however many pieces it takes."""
        at = text.rfind("[")
        if at >= 0:  # a new "[": any markup waiting before it is not one any more
            start, shape = before + at, _markup_shape(text[at:])
        elif self._converted < before:  # the markup waiting goes on
            start, shape = self._converted, _markup_shape(self._open_shape + text)
        else:
            return None
        self._work += len(text) + len(self._open_shape)
        self._open_shape = shape if unfinished_markup(shape) == 0 else ""
        return start if self._open_shape else None

    def _feed(self, written: str, raw_start: int, markup: bool) -> None:
        if written or markup:
            self._written_starts.append(len(self._scanner.text))
            self._raw_starts.append(raw_start)
            self._markup.append(markup)
            self._scanner.add(written, protected=markup)

    def _raw_position(self, written: int) -> int:
        """Where an end (never inside markup) lies in the raw text."""
        i = bisect_right(self._written_starts, written) - 1
        offset = written - self._written_starts[i]
        return self._raw_starts[i] + (0 if self._markup[i] else offset)

    def _take(self) -> list[str]:
        """The complete sentences, cut off the buffer."""
        ends = self._scanner.ends
        if not ends:
            return []
        cuts = [self._raw_position(e) for e in ends]
        sentences = [self._raw[a:b] for a, b in zip([0, *cuts], cuts)]
        last, cut = ends[-1], cuts[-1]
        self._raw = self._raw[cut:]
        self._converted -= cut
        keep = max(bisect_right(self._written_starts, last) - 1, 0)
        # The piece holding the last end starts there now (an end is at a piece's start or inside plain text).
        head_raw = self._raw_starts[keep] + (last - self._written_starts[keep])
        self._written_starts = [0] + [s - last for s in self._written_starts[keep + 1 :]]
        self._raw_starts = [head_raw - cut] + [s - cut for s in self._raw_starts[keep + 1 :]]
        self._markup = self._markup[keep:]
        self._scanner.drop(last)
        return sentences


def _markup_shape(markup: str) -> str:
    """A markup's text from its ``[`` (no other ``[`` in it) with its written words and its phonemes each cut
    to one character: still unfinished exactly when the text is (:func:`unfinished_markup`), and at most
    ``[a](/a/`` long while it is."""
    close = markup.find("]")
    if close < 0:
        return markup[:2]
    return ("[a]" if close > 1 else "[]") + _PHONEME_RUN.sub("a", markup[close + 1 :])


def split_sentences(text: str, lang: str = "a") -> list[str]:
    """``text`` -> its sentences, in order, each with the whitespace after it: they join back into ``text``."""
    buffer = SentenceBuffer(lang)
    sentences = buffer._push(text, final=True)
    rest = buffer.rest()
    return sentences + [rest] if rest else sentences


def complete_prefix(text: str, lang: str = "a") -> int:
    """How much of ``text``, which more text may follow, is complete sentences now."""
    return len(SentenceBuffer(lang).add(text))


def split_phonemes(phonemes: str) -> list[str]:
    """A phoneme string -> its sentences: every ``. ! ? …`` (and closing quotes or brackets) before whitespace
    ends one (phonemes have no abbreviations, and no case)."""
    buffer = SentenceBuffer._for_phonemes()
    sentences = buffer._push(phonemes, final=True)
    rest = buffer.rest()
    return sentences + [rest] if rest else sentences


@dataclass(frozen=True)
class Sentence:
    """One sentence as the G2P reads it: its spans (cut where the sentence begins and ends, and at its pauses;
    only those with something written) and its pauses, in order, and the number of the paragraph it is in
    (blank lines separate paragraphs, counted from 1)."""

    pieces: tuple[Span | Pause, ...]
    paragraph: int


def split_spans(spans: Sequence[Span | Pause], lang: str = "a") -> list[Sentence]:
    """Markup's spans and pauses (:func:`~kokoro_tvm_ext.speech.markup.parse_spans`, a lexicon's overrides among
    them) -> the text's sentences, by the rules of ``lang``; each piece of a sentence keeps its span's language."""
    owners = [item for item in spans for _ in (item.segments if isinstance(item, Span) else (item,))]
    out, paragraph = [], 1
    for cut in _cut(segments_of(spans), lang):
        pieces: list[Span | Pause] = []
        run: list[str | Override] = []
        run_owner = None
        for index, seg in cut:
            if isinstance(seg, Pause) or owners[index] is not run_owner:
                _close(pieces, run_owner, run)
                run, run_owner = [], None
            if isinstance(seg, Pause):
                pieces.append(seg)
            else:
                run.append(seg)
                run_owner = owners[index]
        _close(pieces, run_owner, run)
        out.append(Sentence(tuple(pieces), paragraph))
        paragraph += ends_paragraph([seg for _, seg in cut])
    return out


def _close(pieces: list[Span | Pause], owner: Span | None, run: list[str | Override]) -> None:
    """``run``, the segments of ``owner`` read so far, onto ``pieces`` as a span, if it has something written."""
    if run:
        span = replace(owner, segments=tuple(run))
        if span.has_words:
            pieces.append(span)


def split_segments(segments: Sequence[Segment], lang: str = "a") -> list[list[Segment]]:
    """Text and markup (:func:`~kokoro_tvm_ext.speech.markup.parse_markup`'s segments) -> the segments of each
    sentence: text cut where sentences end, overrides and pauses whole."""
    return [[seg for _, seg in sentence] for sentence in _cut(segments, lang)]


def _cut(segments: Sequence[Segment], lang: str) -> list[list[tuple[int, Segment]]]:
    """Each sentence's segments with the index of the segment each comes from: text cut where sentences end,
    overrides and pauses whole."""
    scanner = _Scanner(_rules(lang))
    for seg in segments:
        scanner.add(*_written(seg))
    scanner.scan()
    ends, k, at = scanner.ends, 0, 0
    sentences: list[list[tuple[int, Segment]]] = [[]]
    for index, seg in enumerate(segments):
        size = len(_written(seg)[0])
        if isinstance(seg, str):
            cut = at
            while k < len(ends) and ends[k] < at + size:
                if ends[k] > cut:
                    sentences[-1].append((index, seg[cut - at : ends[k] - at]))
                sentences.append([])
                cut, k = ends[k], k + 1
            if at + size > cut:
                sentences[-1].append((index, seg[cut - at :]))
        else:
            while k < len(ends) and ends[k] <= at:  # an end at its start (never inside it)
                sentences.append([])
                k += 1
            sentences[-1].append((index, seg))
        at += size
    return [s for s in sentences if s]


def _written(seg: Segment) -> tuple[str, bool]:
    """A segment as the splitter reads it: (its written text, whether it is markup)."""
    if isinstance(seg, str):
        return seg, False
    return (seg.text, True) if isinstance(seg, Override) else (" ", True)


def ends_paragraph(sentence: Sequence[Segment] | str) -> bool:
    """Whether a sentence (from :func:`split_sentences` or :func:`split_segments`) ends with a blank line."""
    tail = sentence if isinstance(sentence, str) else next((s for s in reversed(sentence) if isinstance(s, str)), "")
    return bool(_BLANK_LINE.search(tail[len(tail.rstrip()) :]))


def is_clause_end(word: str) -> bool:
    """Whether a word (a G2P Word's text, or a word of phonemes) ends a clause: its last character, closing
    quotes and brackets aside, is one of ``, ; : — –`` or ``、，；：``."""
    core = word.rstrip(CJK_CLOSERS)
    return bool(core) and core[-1] in CLAUSE_MARKS
