"""Voice and rate tags (Kokoro-FastAPI's ``[voice:NAME]`` and ``[rate:X]``): the spans they make, the chunks
``Speaker.plan`` makes of them (each in its voice's style, language and speed), and the samples: a sentence
switched to voice V is exactly what V gives for that sentence at that place of the same text."""

from __future__ import annotations

import time

import numpy as np
import pytest
from plan_only import NoModel

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech import Speaker
from kokoro_tvm_ext.speech.markup import MAX_SWITCHES, Span, parse_spans
from kokoro_tvm_ext.speech.voices import load_voice, style_for


@pytest.fixture(scope="module")
def speaker():
    return Speaker(NoModel())


ALIASES = {"narrator": "bm_george", "quick": {"voice": "am_adam", "rate": 1.25}, "mix": "af_heart(2)+am_adam(1)"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hi. [voice:bm_george]Yes.", [Span(("Hi. ",), "a"), Span(("Yes.",), "b", "bm_george")]),
        ("[voice:ff_siwis]Oui.", [Span(("Oui.",), "f", "ff_siwis")]),
        (
            "A [rate:1.5]b [rate:0.5]c",
            [Span(("A ",), "a"), Span(("b ",), "a", None, 1.5), Span(("c",), "a", None, 0.5)],
        ),
        # a voice tag ends the rate; an alias carries its own
        (
            "[rate:2]a [voice:quick]b [voice:narrator]c",
            [Span(("a ",), "a", None, 2.0), Span(("b ",), "a", "am_adam", 1.25), Span(("c",), "b", "bm_george")],
        ),
        (
            "[voice:mix]x [voice:af_heart:0.5,ef_dora:0.5]y",
            [Span(("x ",), "a", "af_heart(2)+am_adam(1)"), Span(("y",), "a", "af_heart:0.5,ef_dora:0.5")],
        ),
        ("[VOICE:bm_lewis]Case.", [Span(("Case.",), "b", "bm_lewis")]),
    ],
)
def test_tags_make_spans_in_their_voice_language_and_rate(text, expected):
    assert parse_spans(text, "a", aliases=ALIASES) == expected


def test_tags_turned_off_stay_text():
    assert parse_spans("a [voice:bm_george] b", "a", tags=False) == [Span(("a [voice:bm_george] b",), "a")]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a [voice:] b", "the voice tag [voice:] names no voice"),
        ("a [voice:zz_nobody] b", "the voice tag [voice:zz_nobody]: cannot tell the language"),
        ("a [rate:fast] b", "the rate tag [rate:fast] has no rate"),
        ("a [rate:0] b", "the rate tag [rate:0]: the rate must be between 0.1 and 10"),
        ("a [rate:nan] b", "the rate must be between"),
    ],
)
def test_bad_tags_are_named(speaker, text, message):
    with pytest.raises(InvalidInputError, match=None) as err:
        speaker.plan(text, "af_heart")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_voice_in_a_tag_is_one_line_before_any_synthesis(speaker):
    with pytest.raises(InvalidInputError) as err:
        speaker.plan("Hello. [voice:af_nobody] there.", "af_heart")
    assert "af_nobody" in str(err.value) and "\n" not in str(err.value)


def test_each_chunk_has_its_voices_style_language_and_speed(speaker):
    plan = speaker.plan(
        "Hello there. [voice:narrator]How are you? [rate:4]Fine. [voice:ff_siwis]Bonjour à tous. [voice:quick]Go.",
        "af_heart",
        speed=3.0,
        aliases=ALIASES,
    )
    got = [(c.voice, c.lang, c.speed, c.text) for c in plan.chunks]
    assert got == [
        ("af_heart", "a", 3.0, "Hello there."),
        ("bm_george", "b", 3.0, "How are you?"),
        ("bm_george", "b", 10.0, "Fine."),  # 3 x 4 clamped to the Speaker's 10
        ("ff_siwis", "f", 3.0, "Bonjour à tous."),
        ("am_adam", "a", 3.75, "Go."),
    ]
    george = load_voice("bm_george")
    np.testing.assert_array_equal(plan.chunks[1].style, style_for(george, plan.chunks[1].tokens.size))
    assert [c.seed for c in plan.chunks] == [0, 1, 2, 3, 4]  # by place, whoever speaks


def test_a_language_given_is_every_voices_language(speaker):
    """As Kokoro-FastAPI: an explicit language reads every speaker (SSML's xml:lang still picks its own)."""
    plan = speaker.plan("Hello. [voice:ff_siwis]Bonjour.", "af_heart", lang="en-gb")
    assert [(c.voice, c.lang) for c in plan.chunks] == [("af_heart", "b"), ("ff_siwis", "b")]
    plan = speaker.plan(
        '<speak>Hi. <voice name="ff_siwis"><lang xml:lang="fr">Oui.</lang></voice></speak>', "af_heart", lang="a"
    )
    assert [(c.voice, c.lang) for c in plan.chunks] == [("af_heart", "a"), ("ff_siwis", "f")]


def test_a_voice_switch_inside_a_sentence_ends_the_chunk(speaker):
    plan = speaker.plan("He said [voice:am_adam] hello there.", "af_heart")
    assert [(c.voice, c.text, c.ends_sentence) for c in plan.chunks] == [
        ("af_heart", "He said", False),
        ("am_adam", "hello there.", True),
    ]


def test_a_switch_of_voice_reads_the_same_phonemes_as_that_voice_alone(speaker):
    """The British voice's sentence is read by the British G2P, as bm_george reading the whole text is."""
    text = "I like tomatoes. [voice:bm_george]I like tomatoes."
    tagged = speaker.plan(text, "af_heart").chunks
    plain_george = speaker.plan("I like tomatoes. I like tomatoes.", "bm_george").chunks
    plain_heart = speaker.plan("I like tomatoes.", "af_heart").chunks
    assert tagged[0].phonemes == plain_heart[0].phonemes
    assert tagged[1].phonemes == plain_george[1].phonemes != plain_heart[0].phonemes


def test_one_hundred_thousand_switches_are_refused_at_once(speaker):
    text = "a [voice:af_heart]b [voice:am_adam]" * 50_000
    start = time.thread_time()  # the work, not a loaded host's wall time
    with pytest.raises(InvalidInputError, match=f"more than {MAX_SWITCHES} times"):
        speaker.plan(text, "af_heart")
    assert time.thread_time() - start < 2.0


@pytest.mark.model
def test_a_sentence_switched_to_a_voice_is_that_voices_samples_there(small_artifact):
    """Bit-identity: the tagged text's chunks are the plain text's chunks in each voice, at the same places
    (same seeds), and a rate tag is the request at that speed."""
    real = Speaker.load(small_artifact)
    plain = "Hello there. How are you? Fine, thanks."
    tagged = "Hello there. [voice:bm_george]How are you? [voice:af_heart][rate:1.5]Fine, thanks."
    options = dict(speed=6.0, seed=5)
    got = list(real.stream(tagged, "af_heart", **options))
    heart = list(real.stream(plain, "af_heart", **options))
    george = list(real.stream(plain, "bm_george", **options))
    fast = list(real.stream(plain, "af_heart", speed=9.0, seed=5))
    assert len(got) == len(heart) == 3
    np.testing.assert_array_equal(got[0].audio, heart[0].audio)
    np.testing.assert_array_equal(got[1].audio, george[1].audio)
    np.testing.assert_array_equal(got[2].audio, fast[2].audio)
    assert not np.array_equal(got[1].audio, heart[1].audio)
    assert {w.voice for w in got[1].words} == {"bm_george"} and {w.voice for w in got[0].words} == {"af_heart"}
