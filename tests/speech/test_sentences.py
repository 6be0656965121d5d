"""The one definition of a sentence (speech/sentences.py): a table of texts per language with their sentences
written out by hand, text arriving in pieces cut as the whole text is, and the clause marks."""

from __future__ import annotations

import random

import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech.markup import parse_markup, written_text
from kokoro_tvm_ext.speech.sentences import (
    SentenceBuffer,
    complete_prefix,
    ends_paragraph,
    is_clause_end,
    split_phonemes,
    split_segments,
    split_sentences,
)

# (language, text, its sentences): each keeps the whitespace after it.
TABLE = [
    # English: marks, quotes and brackets after them, ellipses
    ("a", "Hello there. How are you? Fine!", ["Hello there. ", "How are you? ", "Fine!"]),
    ("a", 'He said "Stop." Then he left.', ['He said "Stop." ', "Then he left."]),
    ("a", '"Yes!" she said. (It was late.) We went home.', ['"Yes!" she said. ', "(It was late.) ", "We went home."]),
    ("a", "Wait... what? Wait... What?", ["Wait... what? ", "Wait... ", "What?"]),
    ("a", "Wait… What now?! Nothing.", ["Wait… ", "What now?! ", "Nothing."]),
    # abbreviations, initials, numbers
    (
        "a",
        "Dr. Smith met Mr. Jones and Mrs. Lee. They talked.",
        ["Dr. Smith met Mr. Jones and Mrs. Lee. ", "They talked."],
    ),
    ("a", "A. Tester wrote this. Chapter one", ["A. Tester wrote this. ", "Chapter one"]),
    ("a", "J. R. R. Tolkien wrote it. It is long.", ["J. R. R. Tolkien wrote it. ", "It is long."]),
    ("a", "Fruit, e.g. Apples, i.e. Red ones. Fine.", ["Fruit, e.g. Apples, i.e. Red ones. ", "Fine."]),
    (
        "a",
        "Pens, paper, etc. and more. Books etc. Then we left.",
        ["Pens, paper, etc. and more. ", "Books etc. ", "Then we left."],
    ),
    ("a", "She moved to the U.S. in May. It is far.", ["She moved to the U.S. in May. ", "It is far."]),
    (
        "a",
        "It costs $1.50, or 3.14 units. See example.com now.",
        ["It costs $1.50, or 3.14 units. ", "See example.com now."],
    ),
    ("a", "See No. 5 on p. 12. Done.", ["See No. 5 on p. 12. ", "Done."]),
    ("a", "1. Open the box.\n2. Close it.", ["1. Open the box.\n", "2. Close it."]),
    ("a", "We met in 1999. It rained.", ["We met in 1999. ", "It rained."]),
    # paragraphs and headings: a blank line always ends one
    ("a", "Chapter one\n\nIt was a dark night.", ["Chapter one\n\n", "It was a dark night."]),
    ("a", "the end etc.\n\nand then", ["the end etc.\n\n", "and then"]),
    # a piece with nothing to say joins the sentence after it
    ("a", "Hi. ... Then it rained.", ["Hi. ", "... Then it rained."]),
    ("a", "* * *\n\nMorning came.", ["* * *\n\nMorning came."]),
    # markup is read as its written words, never cut inside
    ("a", "Meet [Dr. Smith](/dˈɑktəɹ smˈɪθ/) now. Bye.", ["Meet [Dr. Smith](/dˈɑktəɹ smˈɪθ/) now. ", "Bye."]),
    ("a", "Stop. [pause:1s] Go on.", ["Stop. [pause:1s] ", "Go on."]),
    ("a", "I like it. [Kokoro](/kˈOkəɹO/) is nice.", ["I like it. ", "[Kokoro](/kˈOkəɹO/) is nice."]),
    ("a", "Pens etc. [kokoro](/kˈOkəɹO/) too.", ["Pens etc. [kokoro](/kˈOkəɹO/) too."]),
    # French: guillemets after a space, a space before ! and ?
    ("f", "« Bonjour ! » dit-il. « Ça va ? » Oui.", ["« Bonjour ! » dit-il. ", "« Ça va ? » ", "Oui."]),
    (
        "f",
        "Il est 10 heures, n'est-ce pas ? M. Dupont arrive.",
        ["Il est 10 heures, n'est-ce pas ? ", "M. Dupont arrive."],
    ),
    ("f", "Mme Roux et Me. Blanc parlent. Fin.", ["Mme Roux et Me. Blanc parlent. ", "Fin."]),
    # Spanish: opening ¿ ¡
    ("e", "¿Qué hora es? ¡Son las tres! Vale.", ["¿Qué hora es? ", "¡Son las tres! ", "Vale."]),
    ("e", "La Sra. García llegó. Tengo 25.", ["La Sra. García llegó. ", "Tengo 25."]),
    # Japanese and Mandarin: full stops with no space after, closers kept with their sentence
    (
        "j",
        "今日はいい天気ですね。散歩に行きましょう！「本当？」はい。",
        ["今日はいい天気ですね。", "散歩に行きましょう！", "「本当？」", "はい。"],
    ),
    (
        "j",
        "「こんにちは」と彼は言った。ええ!? 1990年です。",
        ["「こんにちは」と彼は言った。", "ええ!? ", "1990年です。"],
    ),
    ("z", "今天天气很好。我们去公园散步吧！你来吗？", ["今天天气很好。", "我们去公园散步吧！", "你来吗？"]),
    ("z", "圆周率是3.14。对吗？", ["圆周率是3.14。", "对吗？"]),
    # Hindi: the danda
    ("h", "नमस्ते दुनिया। आज मौसम अच्छा है॥ ठीक है।", ["नमस्ते दुनिया। ", "आज मौसम अच्छा है॥ ", "ठीक है।"]),
    ("h", "डॉ. शर्मा आए। बैठिए।", ["डॉ. शर्मा आए। ", "बैठिए।"]),
]


@pytest.mark.parametrize("lang, text, sentences", TABLE, ids=[f"{t[0]}-{i}" for i, t in enumerate(TABLE)])
def test_sentences_of_each_language(lang, text, sentences):
    assert split_sentences(text, lang) == sentences


@pytest.mark.parametrize("lang, text, sentences", TABLE, ids=[f"{t[0]}-{i}" for i, t in enumerate(TABLE)])
@pytest.mark.parametrize("size", [1, 7])
def test_text_in_pieces_is_cut_where_the_whole_text_is(lang, text, sentences, size):
    """What a Wyoming stream gives: each complete sentence as soon as the text after it proves it, the rest at
    the end; never a cut the whole text does not have."""
    buffer = SentenceBuffer(lang)
    given = [buffer.add(text[i : i + size]) for i in range(0, len(text), size)]
    given.append(buffer.rest())
    assert "".join(given) == text
    assert [s for piece in given if piece for s in split_sentences(piece, lang)] == sentences


def test_random_text_in_random_pieces_is_cut_where_the_whole_text_is():
    """Many marks, closers, spaces, brackets and markup pieces at random, in pieces of random sizes: the
    sentences of the pieces given are the whole text's."""
    atoms = ["a", "A", "Dr", "e.g", " ", " ", "\n", "\n\n", ".", ".", "!", "?", "…", '"', "”", ")", "»", " »"]
    atoms += ["。", "」", "।", "¿", "3", "[", "]", "(/", "/)", "[pause:1s]", "[Kokoro](/kˈOkəɹO/)", "U.S."]
    rng = random.Random(0)
    for _ in range(3000):
        lang = rng.choice("afjhz")
        text = "".join(rng.choice(atoms) for _ in range(rng.randrange(1, 30)))
        whole = split_sentences(text, lang)
        assert "".join(whole) == text
        buffer, size, given = SentenceBuffer(lang), rng.choice([1, 2, 3, 7]), []
        for i in range(0, len(text), size):
            given.append(buffer.add(text[i : i + size]))
        given.append(buffer.rest())
        assert [s for piece in given if piece for s in split_sentences(piece, lang)] == whole, (lang, size, text)
        try:
            segments = parse_markup(text)
        except InvalidInputError:
            continue  # markup the planner refuses
        # The planner's split of the parsed text: the same sentences, read as written.
        assert [written_text(s) for s in split_segments(segments, lang)] == [
            written_text(parse_markup(s)) for s in whole
        ]


@pytest.mark.parametrize(
    "text, complete",
    [
        ("Hello there. How are", "Hello there. "),
        ("Hello there.", ""),  # more may follow: "Hello there.com"
        ("Hello there. ", ""),  # "Hello there. and ..." would go on
        ('He said "yes!" Then', 'He said "yes!" '),
        ("今日は。明日", "今日は。"),
        ("今日は。", ""),  # a 」 may still close it
        ("... And", ""),  # nothing to say yet: it joins what follows
        ("One.\n\nTwo", "One.\n\n"),
        ("Hi. Meet [Dr. Smith](/dˈɑktəɹ smˈɪθ/) now. B", "Hi. Meet [Dr. Smith](/dˈɑktəɹ smˈɪθ/) now. "),
        ("Hi. Meet [Dr. Smith](/dˈɑk", "Hi. "),  # an override not finished yet is not cut
        ("Pens etc. [", ""),  # "[kokoro](...)" would read as a lowercase word
    ],
)
def test_a_sentence_is_complete_once_the_character_after_it_has_come(text, complete):
    lang = "j" if "今" in text else "a"
    assert complete_prefix(text, lang) == len(complete)


def test_a_stream_reads_each_piece_once():
    """10,000 characters one at a time, of runs that never end a sentence: linear work, not quadratic."""
    import time

    for text in ("." * 10_000, " " * 10_000, "[" + "a" * 9_999, "word " * 2_000):
        buffer = SentenceBuffer("a")
        start = time.thread_time()
        for c in text:
            buffer.add(c)
        assert time.thread_time() - start < 1.0, text[:10]
        assert buffer.rest() == text or text.startswith("word")


def test_segments_are_cut_in_text_never_inside_markup():
    segments = parse_markup("Hi. Meet [Dr. Smith](/dˈɑktəɹ smˈɪθ/) now. [pause:0.5s] Bye.")
    sentences = split_segments(segments, "a")
    assert [written_text(s) for s in sentences] == ["Hi. ", "Meet Dr. Smith now.   ", "Bye."]
    assert sentences[1][1] is segments[1] and sentences[1][3] is segments[3]  # the override and the pause, whole


def test_a_blank_line_ends_a_paragraph():
    first, second = split_sentences("One.\n\nTwo. Three.")[:2]
    assert ends_paragraph(first) and not ends_paragraph(second)
    assert ends_paragraph(parse_markup("One [pause:1s]\n \n")) and not ends_paragraph(["One. "])


def test_phonemes_end_at_every_mark_before_a_space():
    assert split_phonemes("ə. bə! kə? də…") == ["ə. ", "bə! ", "kə? ", "də…"]
    assert split_phonemes("ˈA. tˈɛstəɹ “hˈI.” ðˈɛn") == ["ˈA. ", "tˈɛstəɹ “hˈI.” ", "ðˈɛn"]


@pytest.mark.parametrize(
    "word, clause_end",
    [(",", True), (";", True), (":", True), ("—", True), ("–", True), ("、", True), ("，", True), ("；", True)],
)
def test_clause_marks(word, clause_end):
    assert is_clause_end(word) is clause_end


@pytest.mark.parametrize("word", ["wˈʌn,", "Yes,”", "3:30", ".", "hello", '"', "open-weight"])
def test_clause_ends_in_words(word):
    assert is_clause_end(word) is (word in ("wˈʌn,", "Yes,”"))


def test_an_unknown_language_is_named():
    with pytest.raises(InvalidInputError, match="unknown language 'xx'"):
        split_sentences("Hi.", "xx")
