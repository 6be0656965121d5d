"""Chunk edges: the silence the model puts at each end of a call, cut to what the text's punctuation calls for.

Kokoro speaks every call with silence at both ends (measured at -40 dB of the call's peak, 16 sentences, af_heart
and bm_george: 230-400 ms before the first sound, 370-520 ms after the last). Joined as they come, two chunks of
one sentence left 620-880 ms at the comma where they were cut, where the same comma spoken inside one call is
0-330 ms (median 195 ms); two sentences in two calls 640-880 ms against 50-250 ms (median 240 ms) for the full stop
inside one call. So where the planner cut between two chunks of one paragraph, the first keeps half the pause of
what ends it (a clause or a sentence: :data:`GAPS`) after its last sound and the second the other half before its
first; the ends of a speech, of a paragraph (so a heading) and the sides of a pause tag keep the model's own
silence, so a text spoken in one chunk is the model's call as it is (but for the fade below). Every front end
plans and joins through ``SpeechPlan.result``: they all get the same samples.

A call whose last sound stops while still loud (very short inputs: "Sí." with ef_dora ends in a burst cut off 13 dB
under its peak, then 40 ms of silence; the same in PyTorch) gets that sound faded out over 30 ms, so no speech ends
in a click.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kokoro_tvm_ext.model.spec import SAMPLE_RATE

# Silence kept between two chunks, in seconds, by what ended the first: a clause of a sentence cut in two, or a
# whole sentence followed by the next in the same paragraph (the medians above, rounded).
GAPS = {"clause": 0.20, "sentence": 0.25}

SILENCE_DB = -40.0  # below the call's peak: silence (the measurements above used the same)
FADE_SECONDS = 0.03  # the fade on an ending that is still loud
LOUD_ENDING_DB = -30.0  # the last FADE_SECONDS of sound louder than this under the peak: it was cut off


def joint_after(ends_sentence: bool, same_paragraph: bool) -> str | None:
    """What ends a chunk (a key of :data:`GAPS`), seen from a chunk after it: None when that one starts a new
    paragraph."""
    if not ends_sentence:
        return "clause"
    return "sentence" if same_paragraph else None


@dataclass(frozen=True)
class EdgeCut:
    """What is kept of a call's audio: samples ``start:end``, the 30 ms before ``fade_end`` faded out (None: no
    fade). Decided on one backend's audio, it can be applied to another's (tests hold PyTorch's to ours)."""

    start: int
    end: int
    fade_end: int | None = None

    def apply(self, audio: np.ndarray) -> np.ndarray:
        audio = np.asarray(audio, np.float32)
        if self.fade_end is not None:
            n = min(self.fade_end, round(FADE_SECONDS * SAMPLE_RATE))
            audio = audio.copy()
            audio[self.fade_end - n : self.fade_end] *= np.cos(np.linspace(0.0, np.pi / 2, n, dtype=np.float32)) ** 2
        return audio[self.start : self.end]


def edge_cut(audio: np.ndarray, lead: float | None, tail: float | None) -> EdgeCut:
    """How to keep at most ``lead`` seconds of silence before ``audio``'s first sound and ``tail`` seconds after its
    last (None: that edge as it is). Silence is what lies under :data:`SILENCE_DB` of the peak; only silence is
    cut, never sound. A last sound that stops while louder than :data:`LOUD_ENDING_DB` over its last
    :data:`FADE_SECONDS` (a sound dying away by itself is far under it by then) is faded out."""
    audio = np.asarray(audio, np.float32)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak == 0.0:
        return EdgeCut(0, len(audio))
    loud = np.flatnonzero(np.abs(audio) > peak * 10 ** (SILENCE_DB / 20))
    first, last = int(loud[0]), int(loud[-1])
    start = max(0, first - round(lead * SAMPLE_RATE)) if lead is not None else 0
    end = min(len(audio), last + 1 + round(tail * SAMPLE_RATE)) if tail is not None else len(audio)
    n = min(last + 1, round(FADE_SECONDS * SAMPLE_RATE))
    ending = audio[last + 1 - n : last + 1]
    loud_stop = n > 0 and np.sqrt(np.mean(ending**2)) >= peak * 10 ** (LOUD_ENDING_DB / 20)
    return EdgeCut(start, end, last + 1 if loud_stop else None)
