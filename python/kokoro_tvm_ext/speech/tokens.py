"""Phonemes -> Kokoro token ids, and counting tokens against the 510-token context: Kokoro's phoneme set, which
override phonemes are checked against in markup, below G2P."""

from __future__ import annotations

import unicodedata
import warnings
from functools import lru_cache

from kokoro_tvm_ext.model.config import load_config
from kokoro_tvm_ext.support.errors import InputWarning

LISTED = 8  # distinct dropped characters an UnknownPhonemeWarning names


class UnknownPhonemeWarning(InputWarning):
    """Characters outside Kokoro's phoneme vocabulary were dropped."""


@lru_cache(maxsize=1)
def default_vocab() -> dict[str, int]:

    return load_config()["vocab"]


def count_tokens(phonemes: str, vocab: dict[str, int] | None = None) -> int:
    """How many tokens ``phonemes`` makes (characters outside the vocab do not count)."""
    vocab = vocab if vocab is not None else default_vocab()
    return sum(1 for c in phonemes if c in vocab)


def tokenize(phonemes: str, vocab: dict[str, int] | None = None) -> list[int]:
    """Phonemes -> token ids, without the two boundary pads. Characters outside the vocab are dropped: a
    punctuation mark silently (Kokoro has no token for Spanish ``¿ ¡`` or French ``« »``, and KPipeline drops them
    the same way: no sound is lost), anything else with one :class:`UnknownPhonemeWarning` listing them."""
    vocab = vocab if vocab is not None else default_vocab()
    ids, unknown = [], {}
    for c in phonemes:
        if c in vocab:
            ids.append(vocab[c])
        elif not unicodedata.category(c).startswith("P"):
            unknown[c] = unknown.get(c, 0) + 1
    if unknown:
        listed = ", ".join(f"{c!r} (U+{ord(c):04X}) x{n}" for c, n in list(unknown.items())[:LISTED])
        if len(unknown) > LISTED:  # a text of thousands of distinct symbols still warns in one short line
            listed += f" and {len(unknown) - LISTED} other characters"
        warnings.warn(
            f"dropped {sum(unknown.values())} character(s) not in Kokoro's phoneme vocabulary: {listed}",
            UnknownPhonemeWarning,
            stacklevel=2,
        )
    return ids
