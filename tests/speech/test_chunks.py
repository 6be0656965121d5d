"""The one chunking policy (speech/chunks.py) as ``Speaker.plan`` applies it, without a model: a sentence per
chunk whatever the front end, the first cut early, paragraphs and headings alone, text given whole or in pieces."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech import Speaker, Voice, chunk_text, count_tokens, phonemize
from kokoro_tvm_ext.speech.chunks import FIRST_CLAUSE_MIN_TOKENS, TEXT_CHUNK_TOKENS
from kokoro_tvm_ext.speech.edges import GAPS

VOICE = Voice("test", np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), "a")


@pytest.fixture(scope="module")
def speaker():
    return Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))


def texts(plan):
    return [c.text for c in plan.chunks]


LONG = (
    "When the rain finally stopped, we walked down to the harbour to watch the boats come in, one after another, "
    "until dark."
)


def test_a_sentence_per_chunk_the_first_cut_after_its_first_clause_when_long(speaker):
    assert count_tokens(phonemize(LONG)) > FIRST_CLAUSE_MIN_TOKENS
    plan = speaker.plan(LONG + " See you soon!", VOICE)
    assert texts(plan) == ["When the rain finally stopped,", LONG[31:], "See you soon!"]
    assert [c.ends_sentence for c in plan.chunks] == [False, True, True]
    whole = speaker.plan(LONG + " See you soon!", VOICE, first_chunk_tokens=None)
    assert texts(whole) == [LONG, "See you soon!"]


def test_a_short_first_sentence_is_spoken_whole(speaker):
    """Up to FIRST_CLAUSE_MIN_TOKENS the first sentence is one chunk: cutting it would bring its audio little
    earlier and cost a second call (chunks.py)."""
    assert count_tokens(phonemize("Hello there, my friend.")) <= FIRST_CLAUSE_MIN_TOKENS
    plan = speaker.plan("Hello there, my friend. See you soon! It is a fine day.", VOICE)
    assert texts(plan) == ["Hello there, my friend.", "See you soon!", "It is a fine day."]


def test_edges_keep_the_pause_of_the_cut_and_the_model_silence_elsewhere(speaker):
    """Where the text is cut between two chunks of a paragraph, half a comma's or a full stop's pause on each
    side; the model's own silence at the speech's ends, a paragraph's and a pause tag's (speech/edges.py)."""
    text = LONG + " See you soon!\n\nNext paragraph. [pause:1s] After the pause."
    plan = speaker.plan(text, VOICE)
    assert texts(plan) == [
        "When the rain finally stopped,",
        LONG[31:],
        "See you soon!",
        "Next paragraph.",
        "",
        "After the pause.",
    ]
    clause, stop = GAPS["clause"] / 2, GAPS["sentence"] / 2
    assert [(c.lead, c.tail) for c in plan.chunks] == [
        (None, clause),  # the speech's start
        (clause, stop),
        (stop, None),  # the paragraph ends
        (None, None),  # a pause tag follows
        (None, None),  # the pause
        (None, None),  # after the pause, the speech's end
    ]
    # A stream's piece: the speech went on before it and goes on after it in the same paragraph.
    piece = speaker.plan("See you soon!", VOICE, after_sentence=True, continues=True)
    assert [(c.lead, c.tail) for c in piece.chunks] == [(stop, stop)]


def test_phonemes_that_fit_are_one_call(speaker):
    """The user's exact utterance, as KPipeline speaks it: not cut at its sentences or its first clause."""
    phonemes = "həlˈO ðˈɛɹ, maɪ fɹˈɛnd. sˈi ju sˈun!"
    plan = speaker.plan(phonemes=phonemes, voice=VOICE)
    assert [c.phonemes for c in plan.chunks] == [phonemes]
    long = " ".join([phonemes] * 20)  # 740 tokens: its sentences, packed, as text's are
    assert count_tokens(long) > MAX_TOKENS
    chunks = [c.phonemes for c in speaker.plan(phonemes=long, voice=VOICE).chunks]
    assert " ".join(chunks) == long and all(count_tokens(c) <= MAX_TOKENS for c in chunks) and len(chunks) > 1


def test_a_sentence_reads_the_same_whatever_text_comes_with_it(speaker):
    """G2P reads each sentence alone, so a sentence's chunk is the same in any text."""
    alone = speaker.plan("See you soon!", VOICE, first_chunk_tokens=None).chunks[0].phonemes
    for text in ("Hello there. See you soon!", "Goodbye, then; see you later.\n\nSee you soon! Bye."):
        assert alone in [c.phonemes for c in speaker.plan(text, VOICE).chunks]


def test_paragraphs_and_headings_are_chunks_of_their_own(speaker):
    plan = speaker.plan("A. Tester\n\nChapter one\n\nIt was a dark night. Dr. Smith came.", VOICE)
    assert texts(plan) == ["A. Tester", "Chapter one", "It was a dark night.", "Dr. Smith came."]


def test_the_first_cut_keeps_whole_words_within_its_tokens(speaker):
    text = "One two three four five six seven eight nine ten eleven twelve."
    (first, rest) = speaker.plan(text, VOICE, first_chunk_tokens=10).chunks
    assert first.text == "One two" and count_tokens(first.phonemes) <= 10  # wˈʌn tˈu θɹˈi would be 13
    assert rest.text.startswith("three") and [first.seed, rest.seed] == [0, 1]
    assert texts(speaker.plan(text, VOICE, first_chunk_tokens=0)) == [text]  # 0: the first clause, all of it here


def test_chunk_text_is_what_plan_speaks(speaker):
    text = "Hello there, my friend. See you soon!\n\nChapter two"
    assert chunk_text(text) == [c.phonemes for c in speaker.plan(text, VOICE).chunks]
    assert " ".join(chunk_text(text)) == phonemize(text)


def test_pack_sentences_is_ignored_with_a_deprecation_warning(speaker):
    text = "Hello there. See you soon!"
    with pytest.warns(DeprecationWarning, match="pack_sentences"):
        packed = speaker.plan(text, VOICE, pack_sentences=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default says nothing
        plain = speaker.plan(text, VOICE)
    assert texts(packed) == texts(plain) == ["Hello there.", "See you soon!"]


@pytest.mark.parametrize("bad", [-1, 2.5, "24"])
def test_a_bad_first_chunk_size_is_named(speaker, bad):
    with pytest.raises(InvalidInputError, match="first_chunk_tokens must be 0 or more"):
        speaker.plan("Hello there.", VOICE, first_chunk_tokens=bad)
    with pytest.raises(InvalidInputError, match="first_chunk_tokens must be 0 or more"):
        speaker.plan(phonemes="həlˈO ðˈɛɹ.", voice=VOICE, first_chunk_tokens=bad)


# bench/quality.py --chunk-policy, 2026-12-06 (docs/performance.md, "what the chunk policy is chosen from"): one
# fp32 call per length, seconds per phoneme token: (tokens, s/token) by language.
MEASURED_PACE = {
    "a": [(71, 0.0563), (195, 0.0592), (216, 0.0602), (291, 0.0592), (394, 0.0575), (491, 0.0534)],
    "e": [(82, 0.0481), (165, 0.0501), (242, 0.0501), (262, 0.0487), (395, 0.0476), (506, 0.0455)],
    "f": [(80, 0.0566), (195, 0.0554), (242, 0.0546), (295, 0.0534), (375, 0.0492), (505, 0.0436)],
}


def test_the_text_chunk_limit_is_where_the_measured_pace_still_holds():
    """TEXT_CHUNK_TOKENS lies below every language's first length whose pace is off its ~200-token pace by more
    than 4%, and at or above the longest length that still holds for some language (no shorter than needed)."""
    first_off, last_held = [], []
    for rows in MEASURED_PACE.values():
        base = min(rows, key=lambda r: abs(r[0] - 200))[1]
        off = [n for n, pace in rows if n > 200 and abs(pace / base - 1) > 0.04]
        first_off.append(min(off))
        last_held.append(max(n for n, _ in rows if n < min(off)))
    assert min(last_held) <= TEXT_CHUNK_TOKENS < min(first_off), (last_held, first_off)
    assert TEXT_CHUNK_TOKENS < MAX_TOKENS


def test_a_sentence_past_the_text_limit_is_cut_at_its_clauses(speaker):
    clause = "the river ran past the mill and the old stone bridge under a grey sky"
    sentence = ", ".join([clause] * 6).capitalize() + "."
    tokens = count_tokens(phonemize(sentence))
    assert TEXT_CHUNK_TOKENS < tokens <= MAX_TOKENS  # one call could take it; the policy cuts it
    plan = speaker.plan("Hi. " + sentence, VOICE)
    body = plan.chunks[1:]
    assert len(body) >= 2
    assert all(count_tokens(c.phonemes) <= TEXT_CHUNK_TOKENS for c in body)
    assert all(c.text.endswith(",") for c in body[:-1])  # at a clause mark, whole clauses packed
    assert " ".join(c.text for c in body) == sentence
    phonemes = phonemize(sentence)  # raw phonemes that fit the model stay one call, the user's exact utterance
    assert [c.phonemes for c in speaker.plan(phonemes=phonemes, voice=VOICE).chunks] == [phonemes]
