"""`kokoro-tvm say --subtitles out.srt|out.vtt`: speak word-chunked text and write its word timings.

The text is cut into chunks of whole words (``speech_chunks``, as the server does),
so each chunk's durations give its words' times (``timestamps``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInputError, UnwritablePathError


def check(args) -> None:
    """Bad --subtitles usage, before any slow step (raises InvalidInputError or UnwritablePathError)."""
    from ..subtitles import subtitle_format

    subtitle_format(args.subtitles)
    if args.phonemes is not None:
        raise InvalidInputError("--subtitles needs text (words to time), not --phonemes")
    parent = Path(args.subtitles).expanduser().resolve().parent
    if not parent.is_dir():
        raise UnwritablePathError(f"cannot write {args.subtitles}: directory {parent} does not exist")


def speak(runtime, text: str, pack, vocab, speed: float, seed: int):
    """Audio of ``text`` and its word timings, chunk ``i`` with noise seed ``seed + i``."""
    import numpy as np

    from ..assets import phonemize_words, style_for, tokenize
    from ..speech_chunks import chunk_words
    from ..timestamps import word_timings

    pieces, timings, offset = [], [], 0.0
    for i, chunk in enumerate(chunk_words(phonemize_words(text), vocab)):
        tokens = tokenize(chunk.phonemes, vocab)
        audio, durations = runtime.synthesize(
            np.array(tokens, np.int64), style_for(pack, len(tokens)), speed=speed, noise_seed=seed + i
        )
        timings += word_timings(chunk.words, durations, vocab, offset_seconds=offset)
        offset += len(audio) / runtime.sample_rate
        pieces.append(audio)
    if not pieces:
        raise InvalidInputError("nothing to speak: no known phonemes in the input")
    return np.concatenate(pieces), timings


def write(path: str, timings) -> None:
    from ..assets.cache import atomic_write
    from ..subtitles import render, subtitle_format

    text = render(timings, subtitle_format(path)).encode()
    with atomic_write(Path(path).expanduser()) as f:
        f.write(text)
