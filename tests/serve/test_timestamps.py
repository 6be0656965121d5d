"""Word timings from durations, word-level G2P and chunking, subtitles: no server needed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech import Speaker, Voice, Word, count_tokens, load_config, phonemize, phonemize_words
from kokoro_tvm_ext.speech.chunks import text_chunks
from kokoro_tvm_ext.speech.subtitles import cues, render
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
    shifted = [t.shifted(2.0) for t in got]
    assert [(t.start_time, t.end_time) for t in shifted] == [(t.start_time + 2.0, t.end_time + 2.0) for t in got]


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
    chunks = text_chunks(text, "a", VOCAB, max_tokens=max_tokens)
    assert [w.text for c in chunks for w in c.words] == [w.text for w in words]
    for c in chunks:
        assert 0 < count_tokens(c.phonemes, VOCAB) <= max_tokens
        assert c.phonemes == "".join(w.phonemes + (" " if w.space_after else "") for w in c.words)


def test_a_short_first_sentence_is_one_chunk_then_one_chunk_per_sentence():
    """A first sentence up to FIRST_CLAUSE_MIN_TOKENS is not cut at its first clause (speech/chunks.py)."""
    chunks = text_chunks(TEXTS[0] + " Another one. And a third!", "a", VOCAB, first_chunk_tokens=0)
    assert [c.text for c in chunks] == ["Hello world, this is a test.", "Another one.", "And a third!"]
    assert [c.ends_sentence for c in chunks] == [True, True, True]
    capped = text_chunks("One two three four five six seven.", "a", VOCAB, first_chunk_tokens=10)
    # wˈʌn tˈu θɹˈi: 11 tokens with their spaces, so the first 10 hold "One two" (wˈʌn tˈu, 8).
    assert [c.text for c in capped] == ["One two", "three four five six seven."]
    assert count_tokens(capped[0].phonemes, VOCAB) <= 10


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


def _timings(text: str, lang: str = "a"):
    """The word timings ``Speaker.plan`` attaches to ``text``'s chunks, given one frame per token (planning
    needs no model; the durations only place the words)."""
    speaker = Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))
    plan = speaker.plan(text, Voice("test", np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), lang))
    return [
        w
        for i, chunk in enumerate(plan.chunks)
        for w in plan.result(
            i, np.zeros(600 * (chunk.tokens.size + 2), np.float32), np.ones(chunk.tokens.size + 2)
        ).words
    ]


def test_an_initial_is_no_cue_of_its_own_and_a_heading_is_one():
    """A pandoc EPUB's author line and chapter heading: the initial stays in its sentence, the heading (a
    paragraph without a full stop) does not run into the sentence after it."""
    text = "A. Tester wrote this.\n\nChapter one\n\nIt was a dark night. J. R. R. Tolkien read it."
    want = ["A. Tester wrote this.", "Chapter one", "It was a dark night.", "J. R. R. Tolkien read it."]
    assert [c for _, _, c in cues(_timings(text))] == want
    # Read back from the words alone (timings made elsewhere), the initials stay in their sentences too.
    plain = [WordTiming(t.word, t.start_time, t.end_time, t.space_after) for t in _timings(text)]
    assert [c for _, _, c in cues(plain)] == ["A. Tester wrote this.", "Chapter one It was a dark night.", want[-1]]


def test_cues_follow_sentences_in_japanese():
    got = [c for _, _, c in cues(_timings("今日はいい天気ですね。散歩に行きましょう！", "j"))]
    assert got == ["今日はいい天気ですね。", "散歩に行きましょう！"]  # as written: no spaces, the full-width ！
