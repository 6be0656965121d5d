"""Word timestamps from the model's predicted durations: the one place they are computed.

Used by the server (``/dev/captioned_speech``) and ``kokoro-tvm say --subtitles``.

The durations of a synthesis call are frames per token id, including the two
boundary ids (``durations[0]`` and ``durations[-1]``); a frame is 600 samples at
24 kHz (25 ms). A chunk's tokens are its words' phonemes in order, each word's
phoneme characters followed by one space token when ``space_after`` (the last
word of a chunk has none). As in hexgrad's ``KPipeline.join_timestamps``, a
space between two words is split in half: the word before it ends, and the word
after it starts, in the middle of that space. The first word starts where the
leading boundary id ends (KPipeline subtracts a further 3 frames there; we keep
the times a pure function of the durations). Punctuation marks are words of
their own (they are phoneme tokens too); a word without phonemes (``$`` in
``$5``) gets whatever silence lies between its neighbours, possibly none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kokoro_tvm_ext.model.spec import SAMPLE_RATE, SAMPLES_PER_FRAME


@dataclass(frozen=True)
class WordTiming:
    word: str
    start_time: float  # seconds from the start of the whole audio
    end_time: float
    space_after: bool = True  # for joining words back into text (subtitles)
    sentence_end: bool = False  # a sentence (or paragraph, or heading) of the text ends after it: subtitles' cues
    voice: str | None = None  # the voice that spoke it
    mark: str | None = None  # not a word: a named place (SSML's <mark>) at start_time, ``word`` empty

    def as_json(self) -> dict:
        """Kokoro-FastAPI's fields, whether a space follows the word as written (joining words back into text:
        none between Japanese or Mandarin words), and the speaking voice and a mark's name where there are."""
        out = {
            "word": self.word,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "space_after": self.space_after,
        }
        if self.voice is not None:
            out["voice"] = self.voice
        if self.mark is not None:
            out["mark"] = self.mark
        return out

    def shifted(self, seconds: float) -> WordTiming:
        """The same word ``seconds`` later (audio placed after ``seconds`` of other audio)."""
        return replace(self, start_time=self.start_time + seconds, end_time=self.end_time + seconds)


def word_timings(
    words,
    durations,
    vocab: dict[str, int],
    *,
    sample_rate: int = SAMPLE_RATE,
    samples_per_frame: int = SAMPLES_PER_FRAME,
) -> list[WordTiming]:
    """One :class:`WordTiming` per word of a chunk, in seconds from the chunk's first sample (``shifted`` places
    it after the audio before it).

    ``words``: the chunk's words (objects with ``text``, ``phonemes``, ``space_after``),
    ``durations``: that chunk's frames per token id incl. both boundary ids. A token
    count that does not match the durations is a ValueError (the words are not the
    ones that were synthesized)."""
    d = [int(x) for x in durations]
    seconds_per_frame = samples_per_frame / sample_rate
    last = len(words) - 1
    token = 1  # durations[0] is the leading boundary id
    cursor = float(d[0])  # frames: where the next token starts
    start = cursor  # frames: where the next word starts (middle of the space before it)
    out = []
    for i, w in enumerate(words):
        n = sum(1 for c in w.phonemes if c in vocab)
        if token + n > len(d) - 1:
            raise ValueError(f"word_timings: the words have more tokens than the {len(d) - 2} synthesized")
        cursor += sum(d[token : token + n])
        token += n
        end = cursor
        space = w.space_after and i < last and " " in vocab
        if space:
            end = cursor + d[token] / 2
            cursor += d[token]
            token += 1
        out.append(
            WordTiming(
                w.text,
                start * seconds_per_frame,
                end * seconds_per_frame,
                bool(w.space_after if getattr(w, "text_space", None) is None else w.text_space),
            )
        )
        start = end
    if token != len(d) - 1:
        raise ValueError(f"word_timings: the words have {token - 1} tokens, the durations {len(d) - 2}")
    return out


def chunk_seconds(durations, sample_rate: int = SAMPLE_RATE, samples_per_frame: int = SAMPLES_PER_FRAME) -> float:
    """How long a chunk's audio is: every frame, boundary ids included."""
    return sum(int(x) for x in durations) * samples_per_frame / sample_rate


def within(timings: list[WordTiming], cut: float, seconds: float) -> list[WordTiming]:
    """A chunk's timings after ``cut`` seconds of silence were cut from its start (:mod:`.edges`), kept inside its
    ``seconds`` of audio (silence cut from its end may have held a word's last frames: a closing mark's)."""

    def clamp(t: float) -> float:
        return min(max(t - cut, 0.0), seconds)

    return [replace(w, start_time=clamp(w.start_time), end_time=clamp(w.end_time)) for w in timings]
