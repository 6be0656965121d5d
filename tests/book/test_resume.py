"""The work directory keeps a finished chapter's speech exactly: its 16-bit samples, their rate, and every field
of its word timings (subtitles of a resumed run cut their cues as the first run's)."""

from __future__ import annotations

import numpy as np
import pytest

from kokoro_tvm_ext.book.resume import ChapterStore
from kokoro_tvm_ext.book.sources import Chapter
from kokoro_tvm_ext.speech import Speech
from kokoro_tvm_ext.speech.timestamps import WordTiming

pytestmark = pytest.mark.unit


def test_a_kept_chapter_comes_back_as_it_was_saved(tmp_path):
    chapter = Chapter("One", ("One", "A. Tester wrote this."))
    words = [
        WordTiming("One", 0.0, 0.25, False, True),  # a heading: its own cue
        WordTiming("A.", 0.5, 0.75, True, False),  # an initial, not a sentence end
        WordTiming("Tester", 0.75, 1.1),
        WordTiming("this.", 1.2, 1.5, False, True),
    ]
    speech = Speech(np.array([0, 1, -1, 32767, -32768], np.int16), 24000, words)
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    assert store.load(0, chapter) is None
    store.save(0, chapter, speech)
    kept = store.load(0, chapter)
    assert kept.sample_rate == 24000 and kept.words == words
    np.testing.assert_array_equal(kept.audio, speech.audio)
    assert kept.audio.dtype == np.int16
    assert ChapterStore(tmp_path / "book.m4b", "other settings").load(0, chapter) is None


def test_a_damaged_chapter_file_is_spoken_again(tmp_path):
    chapter = Chapter("One", ("Text.",))
    store = ChapterStore(tmp_path / "book.m4b", "settings")
    store.save(0, chapter, Speech(np.zeros(3, np.int16), 24000, []))
    store.path(0, chapter).write_bytes(b"not an npz")
    assert store.load(0, chapter) is None
