"""Chunk edges: the silence the model puts at each end of a call, cut to what the text's punctuation calls for.

Kokoro speaks every call with silence at both ends (measured at -40 dB of the call's peak, 16 sentences, af_heart
and bm_george: 230-400 ms before the first sound, 370-520 ms after the last). Joined as they come, two chunks of
one sentence left 620-880 ms at the comma where they were cut, where the same comma spoken inside one call is
0-330 ms (median 195 ms); two sentences in two calls 640-880 ms against 50-250 ms (median 240 ms) for the full stop
inside one call. So every chunk keeps, after its last sound, half the pause of what ends it (a clause or a
sentence: :data:`GAPS`), and the chunk after it, if it goes on the same paragraph, the other half before its first
sound; the first chunk of a speech, of a paragraph (so after a heading) and after a pause tag keeps the model's
own silence before it. A chunk's tail depends on the chunk alone, so a stream can send it before the text after
it has come. Every front end plans and joins through ``SpeechPlan.result``: they all get the same samples.

A call that stops while its sound is still loud (very short inputs: "Sí." with ef_dora ends 18 dB under its peak
with 25-35 ms of trailing silence) gets a short fade, so no speech ends in a click.
"""

from __future__ import annotations

import numpy as np

# Silence kept between two chunks, in seconds, by what ended the first: a clause of a sentence cut in two, or a
# whole sentence followed by the next in the same paragraph (the medians above, rounded).
GAPS = {"clause": 0.20, "sentence": 0.25}

SILENCE_DB = -40.0  # below the call's peak: silence (the measurements above used the same)
FADE_SECONDS = 0.03  # the fade on an ending that is still loud
LOUD_ENDING_DB = -30.0  # the last FADE_SECONDS louder than this under the peak: the sound was cut off


def joint_after(ends_sentence: bool, same_paragraph: bool) -> str | None:
    """What ends a chunk (a key of :data:`GAPS`), seen from a chunk after it: None when that one starts a new
    paragraph."""
    if not ends_sentence:
        return "clause"
    return "sentence" if same_paragraph else None


def trim_edges(audio: np.ndarray, lead: float | None, tail: float | None, sample_rate: int) -> tuple[np.ndarray, int]:
    """``audio`` with at most ``lead`` seconds of silence before its first sound and ``tail`` seconds after its last
    (None: that edge as it is), and the number of samples cut from its start. Silence is what lies under
    :data:`SILENCE_DB` of the peak; only silence is cut, never sound. An ending still loud is faded."""
    audio = np.asarray(audio, np.float32)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak == 0.0:
        return audio, 0
    loud = np.flatnonzero(np.abs(audio) > peak * 10 ** (SILENCE_DB / 20))
    first, last = int(loud[0]), int(loud[-1])
    start = max(0, first - round(lead * sample_rate)) if lead is not None else 0
    end = min(len(audio), last + 1 + round(tail * sample_rate)) if tail is not None else len(audio)
    out = audio[start:end]
    return _fade_if_cut_off(out, peak, sample_rate), start


def _fade_if_cut_off(audio: np.ndarray, peak: float, sample_rate: int) -> np.ndarray:
    n = min(len(audio), round(FADE_SECONDS * sample_rate))
    if n == 0:
        return audio
    ending = audio[-n:]
    if np.sqrt(np.mean(ending**2)) < peak * 10 ** (LOUD_ENDING_DB / 20):
        return audio
    faded = audio.copy()
    faded[-n:] *= np.cos(np.linspace(0.0, np.pi / 2, n, dtype=np.float32)) ** 2
    return faded
