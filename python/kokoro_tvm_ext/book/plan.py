"""Chapters -> units of work, and each chunk's noise seed.

A unit is a run of whole paragraphs of one chapter (about ``max_chars`` characters),
the piece one worker speaks in one go: its own G2P, chunking and one batched
synthesis. A chapter is one speech: paragraphs are hard boundaries and every sentence
is read alone, so its units speak as the whole chapter would, the first unit's first
chunk cut early. Units depend only on the text, and a chunk's seed only on (base seed,
chapter, unit, chunk), never on which worker runs it or when, so one process and a
cluster write the same samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kokoro_tvm_ext.book.sources import Chapter
from kokoro_tvm_ext.speech.markup import reading_tags, voice_quotes
from kokoro_tvm_ext.support.errors import InvalidInputError

UNIT_CHARS = 1500  # ~100 s of speech: long enough to batch, short enough to spread a chapter


@dataclass(frozen=True)
class Unit:
    chapter: int
    index: int
    paragraphs: tuple[str, ...]
    tags: str = ""  # the voice and rate tags in force where it starts (a chapter is one speech)

    @property
    def text(self) -> str:
        """What its worker speaks: its paragraphs, read in the voice the chapter's tags left before it."""
        return self.tags + "\n\n".join(self.paragraphs)

    @property
    def key(self) -> tuple[int, int]:
        return (self.chapter, self.index)

    @property
    def chars(self) -> int:
        return sum(len(p) for p in self.paragraphs)


def chapter_units(chapter: Chapter, chapter_index: int, max_chars: int = UNIT_CHARS) -> list[Unit]:
    """The chapter's paragraphs packed in order into units of at most ``max_chars`` characters
    (a longer paragraph is a unit of its own)."""
    if max_chars < 1:
        raise InvalidInputError(f"max_chars must be positive, got {max_chars}")
    groups: list[list[str]] = []
    size = 0
    for para in chapter.paragraphs:
        if groups and size + len(para) <= max_chars:
            groups[-1].append(para)
            size += len(para)
        else:
            groups.append([para])
            size = len(para)
    units, tags = [], ""
    for i, group in enumerate(groups):
        units.append(Unit(chapter_index, i, tuple(group), tags))
        tags = reading_tags("\n\n".join(group), tags)
    return units


def voiced_chapter(chapter: Chapter, dialogue_voice: str | None, narrator: str) -> Chapter:
    """The chapter with its quoted speech in ``dialogue_voice`` (``book --dialogue-voice``), each paragraph back in
    the ``narrator``'s voice after it; the chapter itself without one."""
    if not dialogue_voice:
        return chapter
    return replace(chapter, paragraphs=tuple(voice_quotes(p, dialogue_voice, narrator) for p in chapter.paragraphs))


def chunk_seed(base_seed: int, chapter: int, unit: int, chunk: int) -> int:
    """The noise seed of one chunk: a hash of its position, the same wherever it is spoken."""
    if base_seed < 0:
        raise InvalidInputError(f"the seed must be 0 or more, got {base_seed}")
    return int(np.random.SeedSequence([base_seed, chapter, unit, chunk]).generate_state(1, np.uint64)[0])
