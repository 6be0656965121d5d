"""Word timings from durations, word-level G2P and chunking, subtitles: no server needed."""

from __future__ import annotations

import pytest

from kokoro_tvm_ext.speech import Word, count_tokens, load_config, phonemize, phonemize_words
from kokoro_tvm_ext.speech.chunks import chunk_words
from kokoro_tvm_ext.speech.subtitles import render
from kokoro_tvm_ext.speech.timestamps import WordTiming, word_timings

VOCAB = load_config()["vocab"]
TEXTS = [
    "Hello world, this is a test.",
    'He said "Stop." Then he left! Did it cost $5 at 3:30 — or more?',
    "First paragraph here.\n\nSecond one; with a clause: and more…",
]


def test_timings_split_spaces_in_half_and_start_after_the_boundary_id():
    words = [Word("Hi", "hˈI", True), Word("there", "ðɛɹ", False), Word(".", ".", False)]
    #            BOS  h  ˈ  I  ' '  ð  ɛ  ɹ  .  EOS
    durations = [4, 2, 1, 3, 6, 2, 2, 2, 5, 7]
    # In frames: BOS ends at 4; "Hi" 4..10; the space 10..16 (middle 13); "there" 16..22; "." 22..27.
    got = word_timings(words, durations, VOCAB)
    assert [(t.word, t.start_time, t.end_time) for t in got] == [
        ("Hi", 4 * 0.025, 13 * 0.025),
        ("there", 13 * 0.025, 22 * 0.025),
        (".", 22 * 0.025, 27 * 0.025),
    ]
    shifted = word_timings(words, durations, VOCAB, offset_seconds=2.0)
    assert shifted[0].start_time == pytest.approx(2.1)


def test_timings_refuse_durations_of_other_words():
    words = [Word("Hi", "hˈI", False)]
    with pytest.raises(ValueError, match="tokens"):
        word_timings(words, [1, 2, 3, 4, 5, 6], VOCAB)  # 4 tokens synthesized, the words have 3


@pytest.mark.parametrize("text", TEXTS)
def test_words_join_to_the_phoneme_string(text):
    words = phonemize_words(text)
    joined = "".join(w.phonemes + (" " if w.space_after else "") for w in words).strip()
    assert joined == phonemize(text)


@pytest.mark.parametrize("max_tokens", [510, 12])
@pytest.mark.parametrize("text", TEXTS)
def test_chunks_cover_every_word_once_in_order_within_the_limit(text, max_tokens):
    words = phonemize_words(text)
    chunks = chunk_words(words, VOCAB, max_tokens=max_tokens, first_clause=True)
    assert [w.text for c in chunks for w in c.words] == [w.text for w in words]
    for c in chunks:
        assert 0 < count_tokens(c.phonemes, VOCAB) <= max_tokens
        assert c.phonemes == "".join(w.phonemes + (" " if w.space_after else "") for w in c.words)


def test_first_chunk_is_the_first_clause_then_one_chunk_per_sentence():
    chunks = chunk_words(phonemize_words(TEXTS[0] + " Another one. And a third!"), VOCAB, first_clause=True)
    assert [c.text for c in chunks] == ["Hello world,", "this is a test.", "Another one.", "And a third!"]
    capped = chunk_words(
        phonemize_words("One two three four five six seven."), VOCAB, first_clause=True, first_chunk_tokens=10
    )
    assert count_tokens(capped[0].phonemes, VOCAB) <= 10 and len(capped) == 2


def test_subtitles_srt_and_vtt():
    timings = [
        WordTiming("Hello", 0.1, 0.5),
        WordTiming("world", 0.5, 1.0, False),
        WordTiming(".", 1.0, 1.25),
        WordTiming("Bye", 1.25, 3723.5, False),
        WordTiming("!", 3723.5, 3723.75),
    ]
    assert render(timings, ".srt") == (
        "1\n00:00:00,100 --> 00:00:01,250\nHello world.\n\n2\n00:00:01,250 --> 01:02:03,750\nBye!\n"
    )
    assert render(timings, ".vtt") == (
        "WEBVTT\n\n00:00:00.100 --> 00:00:01.250\nHello world.\n\n00:00:01.250 --> 01:02:03.750\nBye!\n"
    )
