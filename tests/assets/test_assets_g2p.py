"""English G2P offline (misaki + blank spaCy + rule tags + espeak-ng), tokens and chunking."""

from __future__ import annotations

import re
import warnings

import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech import (
    UnknownPhonemeWarning,
    chunk_phonemes,
    chunk_text,
    count_tokens,
    g2p,
    phonemize,
    tokenize,
)

pytest.importorskip("misaki")
pytest.importorskip("spacy")

# Expected phonemes, checked by hand against misaki's US conventions: stress marks sit right
# before the stressed vowel; diphthongs are single letters (A = eɪ, I = aɪ, O = oʊ, W = aʊ);
# r is ɹ; "a" as a determiner is ɐ and "the" before a consonant is ðə; US ɑ in "fox",
# ɔ in "dog"; ᵊ marks a syllabic consonant; numbers, currency and years are read out
# ("twenty twenty three"); "Dr." expands to doctor.
EXPECTED = {
    "The quick brown fox jumps over the lazy dog.": "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ.",
    "Hello world, this is a test.": "həlˈO wˈɜɹld, ðɪs ɪz ɐ tˈɛst.",
    "Dr. Smith paid $5.50 for 3 apples in 2023.": "dˈɑktəɹ smˈɪθ pˈAd fˈIv dˈɑləɹz ænd fˈɪfti sˈɛnts fɔɹ θɹˈi ˈæpᵊlz ɪn twˈɛnti twˈɛnti θɹˈi.",  # noqa: E501
}
SENTENCE_END = re.compile(r"[.!?…][”\")\]]*$")


@pytest.mark.parametrize("text", list(EXPECTED))
def test_fixed_sentences_match_expected_phonemes(text):
    assert phonemize(text) == EXPECTED[text]


def test_rule_tags_drive_heteronyms_pronoun_i_and_quotes():
    ps = phonemize('We record a record. I live here, "live" on air.')
    assert "ɹəkˈɔɹd ɐ ɹˈɛkəɹd" in ps  # verb after a pronoun, noun after a determiner
    assert ps.startswith("wˌi") and "ˌI lˈɪv" in ps  # "I" as PRP gets misaki's secondary stress
    assert "“" in ps and "”" in ps and ps.index("“") < ps.index("”")
    assert "ˈOpᵊnwˌAt" in phonemize("open-weight")  # an intra-word hyphen is not a dash


def test_out_of_vocabulary_words_go_to_espeak():
    assert g2p.english._espeak_fallback() is not None, "espeak-ng (espeakng_loader) should be available offline"
    ps = phonemize("Zorblax flibbertigibbet.")
    assert count_tokens(ps) > 10 and ps.endswith(".")


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t"])
def test_empty_text_is_an_input_error(text):
    with pytest.raises(InvalidInputError, match=r"^text is empty$"):
        phonemize(text)
    with pytest.raises(InvalidInputError, match=r"^text is empty$"):
        chunk_text(text)


def test_text_with_nothing_to_say_is_an_input_error():
    with pytest.raises(InvalidInputError, match="text has nothing to pronounce"):
        chunk_text("😀 😀")


def test_tokenize_maps_the_vocab_and_drops_unknown_characters_with_a_warning(bundled_config):
    vocab = bundled_config["vocab"]
    assert tokenize("hˈɛlO", vocab) == [vocab[c] for c in "hˈɛlO"]
    with pytest.warns(UnknownPhonemeWarning) as record:
        ids = tokenize("hˈɛ❓lO☃ ❓", vocab)
    assert ids == [vocab[c] for c in "hˈɛlO "]
    msg = str(record[0].message)
    assert "dropped 3 character(s)" in msg and "'❓' (U+2753) x2" in msg and "'☃' (U+2603) x1" in msg
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tokenize("", vocab) == []
    # Thousands of distinct symbols: one short line that still counts them all.
    symbols = "".join(map(chr, range(0x2600, 0x2600 + 200))) * 3
    with pytest.warns(UnknownPhonemeWarning) as record:
        assert tokenize(symbols, vocab) == []
    msg = str(record[0].message)
    assert "dropped 600 character(s)" in msg and msg.endswith("and 192 other characters") and len(msg) < 400, msg


def test_tokenize_drops_punctuation_without_a_token_silently_as_kmodel_does(bundled_config):
    # KModel.forward keeps vocab.get(c) for each character and drops the misses without a word; the marks Kokoro
    # has no token for (Spanish inverted marks, guillemets) lose no sound, so they warn nothing.
    vocab = bundled_config["vocab"]
    phonemes = "¿kˈe tˈal? ¡mˈuj bjˈen! «bɔ̃ʒˈuʁ»"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = tokenize(phonemes, vocab)
    assert ids == [vocab[c] for c in phonemes if vocab.get(c) is not None]
    assert len(ids) == len(phonemes) - 4


def test_long_text_is_one_chunk_per_sentence_the_first_cut_early():
    sentences = [
        f"Chapter {i} begins quietly, and the {w} keeps walking toward the old harbor at dawn."
        if i % 3
        else f"Is this the end of part {i}? No, the story continues!"
        for i, w in zip(range(1, 61), ["traveler", "keeper", "teacher", "sailor", "painter"] * 12)
    ]
    text = " ".join(sentences)
    chunks = chunk_text(text)
    assert " ".join(chunks) == phonemize(text)  # nothing lost, order kept
    # The first sentence "Chapter 1 begins quietly, and ..." is cut after its first clause.
    assert chunks[0] == "ʧˈæptəɹ wˈʌn bəɡˈɪnz kwˈIətli,"
    assert chunks[1].startswith("ænd ðə")
    # A server asking for an earlier first audio (--first-chunk-tokens 24) cuts that clause between words too.
    early = chunk_text(text, first_chunk_tokens=24)
    assert early[0] == "ʧˈæptəɹ wˈʌn bəɡˈɪnz" and count_tokens(early[0]) <= 24
    assert early[1] == "kwˈIətli, " + chunks[1] and early[2:] == chunks[2:]  # the rest of that sentence: one chunk
    # Then one chunk per sentence: 40 statements (the first cut in two), 20 questions each with its answer.
    assert len(chunks) == 2 + 39 + 2 * 20 and all(count_tokens(c) <= 510 for c in chunks)
    assert all(SENTENCE_END.search(c) for c in chunks[1:]), [c[-20:] for c in chunks]
    assert chunk_text(text, first_chunk_tokens=None)[0] == chunks[0] + " " + chunks[1]


def test_an_overlong_sentence_splits_at_clauses_then_words_then_characters():
    clauses = ", ".join(["ðə lˈɔŋ ɹˈOd wˈɛnt ˈɔn"] * 60) + "."
    chunks = chunk_phonemes(clauses, first_chunk_tokens=None)
    assert len(chunks) > 1 and all(count_tokens(c) <= 510 for c in chunks)
    assert all(c.endswith(",") for c in chunks[:-1]) and chunks[-1].endswith(".")
    assert " ".join(chunks) == clauses

    words = " ".join(["ðə lˈɔŋ ɹˈOd"] * 80)
    small = chunk_phonemes(words, max_tokens=50, first_chunk_tokens=None)
    assert all(count_tokens(c) <= 50 for c in small) and " ".join(small) == words

    blob = "a" * 1200
    assert [len(c) for c in chunk_phonemes(blob, first_chunk_tokens=None)] == [510, 510, 180]


def test_paragraphs_are_hard_boundaries_single_newlines_are_spaces():
    assert chunk_text("First paragraph.\n\nSecond one.") == ["fˈɜɹst pˈɛɹəɡɹˌæf.", "sˈɛkənd wˈʌn."]
    assert chunk_text("Line one\nline two.") == ["lˈIn wˈʌn lˈIn tˈu."]


def test_phonemes_that_fit_are_one_chunk_else_one_per_sentence():
    """Raw phonemes are the user's exact utterance: one call when they fit, as KPipeline speaks them."""
    assert chunk_phonemes("ə. bə! kə? də…") == ["ə. bə! kə? də…"]
    assert chunk_phonemes("ðə lˈɔŋ ɹˈOd, wˈɛnt ˈɔn. ə.", first_chunk_tokens=18) == ["ðə lˈɔŋ ɹˈOd, wˈɛnt ˈɔn. ə."]
    # Past max_tokens: a chunk per sentence, the first cut early as text's is.
    assert chunk_phonemes("ə. bə! kə? də…", max_tokens=6) == ["ə.", "bə!", "kə?", "də…"]
    # "ðə lˈɔŋ ɹˈOd wˈɛnt" is 17 tokens with its spaces, one more word 21: the cut at 18 keeps 4 words.
    long = "ðə lˈɔŋ ɹˈOd wˈɛnt ˈɔn. ə."
    assert chunk_phonemes(long, max_tokens=24, first_chunk_tokens=18) == ["ðə lˈɔŋ ɹˈOd wˈɛnt", "ˈɔn.", "ə."]
