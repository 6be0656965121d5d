"""Words -> the chunks that one synthesis call each takes, keeping every word whole.

One chunk per sentence, so a stream can send each sentence as soon as it is
spoken. A sentence longer than the model's context (510 tokens) is split at clause
punctuation (, ; : — –), then between words, packing the pieces greedily. With
``first_clause=True`` the first chunk is only the first clause of the first
sentence (and, when that clause is long, its first ``first_chunk_tokens`` worth of
words), so the first audio of a response comes early.

Each chunk keeps its words, so word timestamps can be computed from its durations
(:mod:`kokoro_tvm_ext.speech.timestamps`); the last word of a chunk has no space after it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.speech.g2p.tokens import count_tokens

_SENTENCE_END = (".", "!", "?", "…")
_CLOSERS = ('"', "”", "’", "'", ")", "]", "}", "»")
_CLAUSE_END = (",", ";", ":", "—", "–")


@dataclass(frozen=True)
class Chunk:
    words: tuple  # Word objects (text, phonemes, space_after)
    phonemes: str

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


def _sentences(words: list) -> list[list]:
    """Split after sentence-final punctuation and any closing quotes or brackets after it."""
    out, cur, ended = [], [], False
    for w in words:
        if ended and w.text not in _CLOSERS:
            out.append(cur)
            cur = []
        cur.append(w)
        ended = w.text.endswith(_SENTENCE_END) or (ended and w.text in _CLOSERS)
    if cur:
        out.append(cur)
    return out


def _split_at(words: list, is_break) -> list[list]:
    out, cur = [], []
    for w in words:
        cur.append(w)
        if is_break(w):
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
        if self.fits(words):
            return [words]
        out = []
        for clause in self.pack(_split_at(words, lambda w: w.text in _CLAUSE_END)):
            if self.fits(clause):
                out.append(clause)
                continue
            singles = []
            for w in clause:
                singles.extend([[w]] if self.fits([w]) else self.split_word(w))
            out.extend(self.pack(singles))
        return out


def chunk_words(
    words,
    vocab: dict[str, int],
    *,
    max_tokens: int = MAX_TOKENS,
    pack_sentences: bool = False,
    first_clause: bool = False,
    first_chunk_tokens: int = 0,
) -> list[Chunk]:
    """Chunks of at most ``max_tokens`` tokens, in order, covering every word once.

    ``pack_sentences``: whole sentences are packed greedily into one chunk up to ``max_tokens`` (the pieces
    of a sentence too long for one chunk are not merged with their neighbours).

    Chunks without any token (only phoneme-less words) are merged into a neighbour, or
    dropped when the whole text has nothing to pronounce (then the result is empty)."""
    if max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be positive, got {max_tokens}")
    words = list(words)
    packer = _Packer(vocab, max_tokens)
    groups: list[list] = []
    whole = False  # whether groups[-1] is whole sentences, which a packed chunk may extend
    for sentence in _sentences(words):
        pieces = packer.fit(sentence)
        if pack_sentences and whole and len(pieces) == 1 and packer.fits(groups[-1] + pieces[0]):
            groups[-1] = groups[-1] + pieces[0]
            continue
        groups.extend(pieces)
        whole = len(pieces) == 1
    if first_clause and groups:
        head = _split_at(groups[0], lambda w: w.text in _CLAUSE_END)
        first, rest = head[0], [w for piece in head[1:] for w in piece]
        if first_chunk_tokens and packer.tokens(first) > first_chunk_tokens:
            cut = 1
            while cut < len(first) and packer.tokens(first[: cut + 1]) <= first_chunk_tokens:
                cut += 1
            first, rest = first[:cut], first[cut:] + rest
        groups[0:1] = [g for g in (first, rest) if g]
    # Phoneme-less groups (a lone "$" or quote) ride along with the previous group.
    merged: list[list] = []
    for g in groups:
        silent = packer.tokens(g) == 0 or (merged and packer.tokens(merged[-1]) == 0)
        if merged and silent and packer.fits(merged[-1] + g):
            merged[-1] = merged[-1] + g
        else:
            merged.append(g)
    return [_make(g) for g in merged if packer.tokens(g) > 0]
