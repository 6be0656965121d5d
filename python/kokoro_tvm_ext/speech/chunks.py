"""Text (or phonemes) -> the chunks that one synthesis call each takes: the one chunker and the one chunking
policy, for every front end (``say``, the HTTP server, Wyoming, ``book``, ``Speaker.speak``/``stream``).

* The text path's stage after G2P: it consumes what :func:`~kokoro_tvm_ext.speech.text_path.read_text` gives,
  sentences cut where :mod:`kokoro_tvm_ext.speech.sentences` says (paragraphs, so headings, included), each read
  by the G2P alone, so its phonemes never depend on the text that came with it.
* One sentence per chunk. A sentence longer than :data:`TEXT_CHUNK_TOKENS` (300 of the model's 510) is split at
  its clauses (``, ; : — –``, ``、，；：``), the pieces packed greedily, then between words, then (one word longer
  than the limit) between phonemes.
* The first chunk of a speech is its first clause when its first sentence is longer than
  :data:`FIRST_CLAUSE_MIN_TOKENS`, so its audio comes early (``first_chunk_tokens`` > 0 also cuts that clause after
  at most that many tokens, whole words, and then cuts any first sentence longer than that; None: no cut; default
  :data:`FIRST_CHUNK_TOKENS`). The cut is not heard: :mod:`.edges` leaves a comma's pause there.
* A pause tag (``[pause:1s]``) stands between the chunks around it.

Each chunk keeps its words, so word timestamps can be computed from its durations
(:mod:`kokoro_tvm_ext.speech.timestamps`); the last word of a chunk has no space after it. Phonemes given as
input are spoken in one call when they fit (the user's exact utterance, as KPipeline speaks them), else chunked by
the same code, their space-separated words standing for words.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.speech.g2p.words import SentenceWords, Word
from kokoro_tvm_ext.speech.languages import language
from kokoro_tvm_ext.speech.markup import Pause
from kokoro_tvm_ext.speech.sentences import is_clause_end, split_phonemes
from kokoro_tvm_ext.speech.text_path import read_text
from kokoro_tvm_ext.speech.tokens import count_tokens, default_vocab
from kokoro_tvm_ext.support.errors import InvalidInputError

# The first chunk is the first clause, whatever its length: a cut inside a clause ends the chunk with a falling
# voice where the sentence goes on (Whisper heard "O trem sai da | estação" as "O trem saída. Estação"), and at a
# clause mark the voice already pauses. A server can trade that for earlier audio (--first-chunk-tokens 24).
FIRST_CHUNK_TOKENS = 0

# A text's chunks are at most this many tokens (a call takes up to MAX_TOKENS = 510). Measured by bench/quality.py
# --chunk-policy (docs/performance.md, "what the chunk policy is chosen from"): a call's pace is even up to ~300
# tokens and then speeds up with its length (English -3% at ~400 and -10% at ~500 tokens, Spanish -4% / -8%,
# French already -10% at 375), while its level and the recognizer's error do not change. So a longer sentence is
# cut at its clauses, where the edges leave a comma's pause (.edges); Kokoro-FastAPI cuts at 250.
TEXT_CHUNK_TOKENS = 300

# A first sentence up to this many tokens is spoken whole, as one chunk. Its audio is ~0.95 s + 55 ms a token
# (measured, af_heart, 11-196 tokens), so 60 tokens are ~4 s of speech, synthesized in about 1 s at fp32 on 2 cores
# (RTF 0.24, AMD Zen 4): cutting its first clause off would bring the first audio ~0.3-0.5 s earlier and cost a
# second call with its edge silences (+0.1-0.2 s for a cold `say` of "The kettle is on; tea in five minutes.").
# Longer first sentences are cut at their first clause: there the first audio comes 1 s or more earlier.
FIRST_CLAUSE_MIN_TOKENS = 60


@dataclass(frozen=True)
class Chunk:
    words: tuple  # Word objects (text, phonemes, space_after)
    phonemes: str
    ends_sentence: bool = False  # its sentence ends with it (not a clause or a piece of the sentence)
    paragraph: int = 1  # the paragraph it is in (counted from 1): its edges' silences depend on it (.edges)
    voice: str | None = None  # its span's voice (None: the request's), language and rate
    lang: str | None = None
    rate: float = 1.0

    @property
    def text(self) -> str:
        return "".join(w.text + (" " if w.space_after else "") for w in self.words).strip()


def _make(words: list) -> Chunk:
    """A chunk whose phoneme string neither starts nor ends with a space: those would be
    stripped, and the word timings must count exactly the space tokens synthesized."""
    words = list(words)
    spoken = [i for i, w in enumerate(words) if w.phonemes]
    first, last = (spoken[0], spoken[-1]) if spoken else (len(words), -1)
    for i, w in enumerate(words):
        if w.space_after and (i < first or i >= last):
            words[i] = replace(w, space_after=False)
    phonemes = "".join(w.phonemes + (" " if w.space_after else "") for w in words)
    return Chunk(tuple(words), phonemes)


def _split_at_clauses(words: list) -> list[list]:
    out, cur = [], []
    for w in words:
        cur.append(w)
        if is_clause_end(w.text):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


class _Packer:
    def __init__(self, vocab, max_tokens: int):
        self.vocab, self.max_tokens = vocab, max_tokens

    def tokens(self, words) -> int:
        return count_tokens(_make(words).phonemes, self.vocab) if words else 0

    def spoken(self, words) -> bool:
        """Whether the words say anything: a token other than the space."""
        return any(c in self.vocab for w in words for c in w.phonemes if c != " ")

    def fits(self, words) -> bool:
        return self.tokens(words) <= self.max_tokens

    def pack(self, pieces: list[list]) -> list[list]:
        out, cur = [], []
        for piece in pieces:
            if cur and self.fits(cur + piece):
                cur = cur + piece
            else:
                if cur:
                    out.append(cur)
                cur = piece
        if cur:
            out.append(cur)
        return out

    def split_word(self, w) -> list[list]:
        """A single word longer than the context: its phonemes in pieces (text kept on the first)."""
        pieces, cur, n = [], "", 0
        for c in w.phonemes:
            k = 1 if c in self.vocab else 0
            if n + k > self.max_tokens:
                pieces.append(cur)
                cur, n = "", 0
            cur += c
            n += k
        pieces.append(cur)
        return [
            [replace(w, text=w.text if i == 0 else "", phonemes=p, space_after=False)] for i, p in enumerate(pieces)
        ]

    def fit(self, words: list) -> list[list]:
        """A sentence in pieces of at most ``max_tokens``: itself, else its clauses packed, else words."""
        if self.fits(words):
            return [words]
        out = []
        for clause in self.pack(_split_at_clauses(words)):
            if self.fits(clause):
                out.append(clause)
                continue
            singles = []
            for w in clause:
                singles.extend([[w]] if self.fits([w]) else self.split_word(w))
            out.extend(self.pack(singles))
        return out

    def cut_first(self, words: list, first_chunk_tokens: int) -> list[list]:
        """The first chunk cut after its first clause, and that clause after at most ``first_chunk_tokens``
        tokens of whole words (at least one word; 0: no limit), when the sentence is longer than that limit (0:
        :data:`FIRST_CLAUSE_MIN_TOKENS`); else the sentence whole."""
        if self.tokens(words) <= (first_chunk_tokens or FIRST_CLAUSE_MIN_TOKENS):
            return [words]
        head = _split_at_clauses(words)
        first, rest = head[0], [w for piece in head[1:] for w in piece]
        if first_chunk_tokens and self.tokens(first) > first_chunk_tokens:
            cut = 1
            while cut < len(first) and self.tokens(first[: cut + 1]) <= first_chunk_tokens:
                cut += 1
            first, rest = first[:cut], first[cut:] + rest
        return [g for g in (first, rest) if g]


def chunk_sentence(
    words,
    vocab: dict[str, int],
    *,
    max_tokens: int = TEXT_CHUNK_TOKENS,
    first_chunk_tokens: int | None = None,
    ends_sentence: bool = True,
) -> list[Chunk]:
    """One sentence's words -> its chunks, in order, covering every word once: one chunk if it fits in
    ``max_tokens`` tokens, else its clauses (then words) packed. ``first_chunk_tokens``: this is a speech's
    first sentence, whose first chunk is cut early (see the module). Pieces that say nothing (a lone ``$`` or
    quote) ride along with a neighbour; a sentence that says nothing gives no chunk. ``ends_sentence``: the
    words end their sentence (not when a pause follows them inside it), so the last chunk says so."""
    if max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be positive, got {max_tokens}")
    packer = _Packer(vocab, max_tokens)
    groups = packer.fit(list(words))
    if first_chunk_tokens is not None and groups:
        groups[0:1] = packer.cut_first(groups[0], first_chunk_tokens)
    merged: list[list] = []
    for g in groups:
        silent = not packer.spoken(g) or (merged and not packer.spoken(merged[-1]))
        if merged and silent and packer.fits(merged[-1] + g):
            merged[-1] = merged[-1] + g
        else:
            merged.append(g)
    chunks = [_make(g) for g in merged if packer.spoken(g)]
    if chunks and ends_sentence:
        chunks[-1] = replace(chunks[-1], ends_sentence=True)
    return chunks


def _check_first_chunk_tokens(first_chunk_tokens) -> None:
    if first_chunk_tokens is not None and (not isinstance(first_chunk_tokens, int) or first_chunk_tokens < 0):
        raise InvalidInputError(f"first_chunk_tokens must be 0 or more (or None: no cut), got {first_chunk_tokens!r}")


def chunk_sentences(
    sentences: Iterable[SentenceWords | Pause],
    vocab: dict[str, int],
    *,
    max_tokens: int = TEXT_CHUNK_TOKENS,
    first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
) -> list[Chunk | Pause]:
    """Sentences' Words (and pauses) in order, as :func:`~kokoro_tvm_ext.speech.text_path.read_text` gives them
    -> the speech's chunks and pauses, by the policy of the module: what ``Speaker.plan`` speaks."""
    _check_first_chunk_tokens(first_chunk_tokens)
    out: list[Chunk | Pause] = []
    first = first_chunk_tokens
    for item in sentences:
        if isinstance(item, Pause):
            out.append(item)
            continue
        chunks = chunk_sentence(
            item.words, vocab, max_tokens=max_tokens, first_chunk_tokens=first, ends_sentence=item.ends_sentence
        )
        if chunks:
            first = None  # the speech's first chunk is made
        out += [replace(c, paragraph=item.paragraph, voice=item.voice, lang=item.lang, rate=item.rate) for c in chunks]
    return out


def text_chunks(
    text: str,
    lang: str,
    vocab: dict[str, int],
    *,
    max_tokens: int = TEXT_CHUNK_TOKENS,
    first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
    cancel: threading.Event | None = None,
    lexicon=None,
) -> list[Chunk | Pause]:
    """Text -> its chunks (and pauses) in order: :func:`~kokoro_tvm_ext.speech.text_path.read_text`, then
    :func:`chunk_sentences`."""
    sentences = read_text(text, lang, vocab=vocab, lexicon=lexicon, cancel=cancel)
    return chunk_sentences(sentences, vocab, max_tokens=max_tokens, first_chunk_tokens=first_chunk_tokens)


def phoneme_chunks(
    phonemes: str,
    vocab: dict[str, int],
    *,
    max_tokens: int = MAX_TOKENS,
    first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
) -> list[Chunk]:
    """Kokoro phonemes -> one chunk when they fit in ``max_tokens`` (the user's exact utterance, in one call, as
    KPipeline speaks them; ``first_chunk_tokens`` does not cut them), else chunks by the same policy as text:
    sentences end at every ``. ! ? …`` before a space, their space-separated words stand for words."""
    _check_first_chunk_tokens(first_chunk_tokens)
    phonemes = " ".join(phonemes.split())
    whole = count_tokens(phonemes, vocab) <= max_tokens
    sentences = []
    for sentence in [phonemes] if whole else split_phonemes(phonemes):
        parts = sentence.split()
        words = [Word(p, p, i < len(parts) - 1) for i, p in enumerate(parts)]
        sentences.append(SentenceWords(words, paragraph=1, ends_sentence=True))
    first = None if whole else first_chunk_tokens
    return chunk_sentences(sentences, vocab, max_tokens=max_tokens, first_chunk_tokens=first)


def chunk_phonemes(
    phonemes: str,
    vocab: dict[str, int] | None = None,
    max_tokens: int = MAX_TOKENS,
    first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
) -> list[str]:
    """Phonemes -> the phoneme strings of the chunks ``Speaker.plan(phonemes=...)`` makes of them: all in one when
    they fit in ``max_tokens`` tokens, else one sentence each, the first cut early (``first_chunk_tokens=None``: not
    cut). Chunks that say nothing are dropped."""
    vocab = vocab if vocab is not None else default_vocab()
    return [
        c.phonemes
        for c in phoneme_chunks(phonemes, vocab, max_tokens=max_tokens, first_chunk_tokens=first_chunk_tokens)
    ]


def chunk_text(
    text: str,
    vocab: dict[str, int] | None = None,
    max_tokens: int = TEXT_CHUNK_TOKENS,
    lang: str = "a",
    first_chunk_tokens: int | None = FIRST_CHUNK_TOKENS,
) -> list[str]:
    """Text -> the phoneme strings of the chunks ``Speaker.plan`` speaks for it (see the module; pauses have
    none). Raises ``InvalidInputError("text is empty")`` for empty text, and InvalidInputError when nothing in
    it can be pronounced."""
    vocab = vocab if vocab is not None else default_vocab()
    chunks = [
        c.phonemes
        for c in text_chunks(text, lang, vocab, max_tokens=max_tokens, first_chunk_tokens=first_chunk_tokens)
        if isinstance(c, Chunk)
    ]
    if not chunks:
        raise InvalidInputError(
            f"text has nothing to pronounce in {language(lang).name}: {text[:40]!r} "
            "(is it in another language? choose one with --lang or a voice of that language)"
        )
    return chunks
