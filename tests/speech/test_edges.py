"""Chunk edges (speech/edges.py) on signals whose answer is known by hand: silence is what lies under -40 dB of the
peak, only silence is cut, and a sound stopping while loud fades out over 30 ms (a cos² ramp)."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_tvm_ext.speech.edges import edge_cut

SR = 24000
RAMP = np.cos(np.linspace(0, np.pi / 2, 720)) ** 2  # 30 ms at 24 kHz


def trim_edges(audio, lead, tail, sample_rate):
    assert sample_rate == SR
    cut = edge_cut(audio, lead, tail)
    return cut.apply(audio), cut.start


def pulse(before: int, length: int, after: int, level: float = 0.5) -> np.ndarray:
    return np.concatenate([np.zeros(before), np.full(length, level), np.zeros(after)]).astype(np.float32)


def test_silence_is_cut_to_what_is_asked_and_a_loud_stop_fades():
    audio = pulse(6000, 4800, 12000)
    out, cut = trim_edges(audio, 0.1, 0.2, SR)
    assert cut == 6000 - 2400
    sound = np.full(4800, 0.5, np.float32)
    sound[-720:] *= RAMP
    np.testing.assert_allclose(out, np.concatenate([np.zeros(2400), sound, np.zeros(4800)]), atol=1e-7)


def test_none_keeps_an_edge_and_a_sound_dying_away_is_untouched():
    dying = np.linspace(0.5, 0.0, 24000, dtype=np.float32)  # its last 30 ms over -40 dB are ~32 dB under the peak
    audio = np.concatenate([np.zeros(3000, np.float32), dying, np.zeros(6000, np.float32)])
    out, cut = trim_edges(audio, None, None, SR)
    assert cut == 0 and out.tobytes() == audio.tobytes()


def test_a_sound_under_minus_40_db_is_silence_and_over_it_is_sound():
    quiet, audible = pulse(6000, 4800, 0), pulse(6000, 4800, 0)
    quiet[1000] = 0.5 * 10 ** (-42 / 20)
    audible[1000] = 0.5 * 10 ** (-38 / 20)
    assert trim_edges(quiet, 0.01, None, SR)[1] == 6000 - 240
    assert trim_edges(audible, 0.01, None, SR)[1] == 1000 - 240


def test_nothing_is_added_where_the_silence_is_shorter_than_asked():
    audio = pulse(100, 4800, 50)
    out, cut = trim_edges(audio, 0.5, 0.5, SR)
    assert cut == 0 and len(out) == len(audio)


@pytest.mark.parametrize("audio", [np.zeros(0, np.float32), np.zeros(4800, np.float32)])
def test_silence_alone_stays_as_it_is(audio):
    out, cut = trim_edges(audio, 0.1, 0.1, SR)
    assert cut == 0 and out.tobytes() == audio.tobytes()
