"""Split phonemes into chunks of at most 510 tokens, at sentence, then clause boundaries.

Every G2P here writes sentence ends as ``. ! ? …`` and clause marks as ``, ; : —`` in its
phonemes (Japanese and Chinese ``。！？`` become ``. ! ?`` and ``、，`` a comma), so one
phoneme-level splitter serves all nine languages. ``chunk_text`` (in ``__init__``) phonemizes
paragraph by paragraph (blank lines), always a hard boundary, then uses it; inside a paragraph
whole sentences are packed greedily up to 510 tokens, a sentence that is too long splits at
clause punctuation, then at spaces, and as a last resort between characters.
"""

from __future__ import annotations

import re

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.speech.g2p.tokens import count_tokens, default_vocab

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"”’)\]])\s+")
_CLAUSE_END = re.compile(r"(?<=[,;:—])\s+|\s+(?=—)")


def _split(text: str, level: int) -> list[str]:
    if level == 0:
        pieces = _SENTENCE_END.split(text)
    elif level == 1:
        pieces = _CLAUSE_END.split(text)
    else:
        pieces = text.split()
    return [p.strip() for p in pieces if p and p.strip()]


def chunk_phonemes(phonemes: str, vocab: dict[str, int] | None = None, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Split a phoneme string into chunks of at most ``max_tokens`` tokens each.

    Whole sentences are packed greedily; an over-long sentence is split at clause
    punctuation, then spaces, then between characters, and its pieces are not merged with
    neighbouring sentences. Chunks with no tokens at all are dropped."""
    if max_tokens < 1:
        raise InvalidInputError(f"max_tokens must be positive, got {max_tokens}")
    vocab = vocab if vocab is not None else default_vocab()

    def fits(s: str) -> bool:
        return count_tokens(s, vocab) <= max_tokens

    def hard_split(s: str) -> list[str]:
        out, cur, n = [], [], 0
        for c in s:
            k = 1 if c in vocab else 0
            if n + k > max_tokens:
                out.append("".join(cur))
                cur, n = [], 0
            cur.append(c)
            n += k
        out.append("".join(cur))
        return [x.strip() for x in out if x.strip()]

    def chunk(s: str, level: int) -> list[str]:
        if fits(s):
            return [s]
        if level > 2:
            return hard_split(s)
        out, cur = [], ""
        for piece in _split(s, level):
            if not fits(piece):
                if cur:
                    out.append(cur)
                    cur = ""
                out.extend(chunk(piece, level + 1))
                continue
            joined = f"{cur} {piece}" if cur else piece
            if fits(joined):
                cur = joined
            else:
                out.append(cur)
                cur = piece
        if cur:
            out.append(cur)
        return out

    text = " ".join(phonemes.split())
    # A chunk of spaces and unknown characters only would be silence: dropped.
    return [c for c in chunk(text, 0) if count_tokens(c.replace(" ", ""), vocab) > 0] if text else []
