"""One chunking policy for every front end: the same text gives the same chunks (their phonemes) and noise seeds
from `say` (``Speaker.plan`` as cli/say.py calls it), the HTTP server's planning (serve/plan.py), a Wyoming stream
in pieces of any size (serve/wyoming.py's ``TextStream``), and a book's chapter (book/render.py's
``render_unit``). Planning needs no model: a stand-in gives the two numbers ``plan`` reads (the book's unit is
also run, on the session's small artifact)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("wyoming")

from kokoro_tvm_ext.model.spec import MAX_TOKENS  # noqa: E402
from kokoro_tvm_ext.serve.plan import Limits, plan_speech  # noqa: E402
from kokoro_tvm_ext.serve.voices import VoiceBook  # noqa: E402
from kokoro_tvm_ext.serve.wyoming import TextStream  # noqa: E402
from kokoro_tvm_ext.speech import Speaker  # noqa: E402

VOICE = "af_heart"
TEXT = (
    "Hello there, my friend. Dr. Smith met A. Tester at 3.14 p.m. today! [pause:0.5s] Wait... what? "
    "See [Kokoro](/kˈOkəɹO/) in the U.S. soon.\n\nChapter two\n\nIt was late; we left."
)


@pytest.fixture(scope="module")
def planner():
    return Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))


def chunks(*plans):
    """What makes a chunk's samples: its phonemes, seed, pause and the silences kept at its edges."""
    return [(c.phonemes, c.seed, c.pause_samples, c.lead, c.tail) for plan in plans for c in plan.chunks]


@pytest.fixture(scope="module")
def say(planner):
    return planner.plan(TEXT, VOICE, speed=1.0, seed=0)


def test_the_chunks_are_the_policys(say):
    """Written out: a chunk per sentence (the first too short to be cut after its first clause; the initial, the
    title, the decimal and the abbreviation inside theirs; the heading alone), the pause between, seeds going on
    over it; edges keeping half a full stop's pause on each side of a cut between sentences of a paragraph, the
    model's silence elsewhere."""
    assert [c.text for c in say.chunks] == [
        "Hello there, my friend.",
        "Dr. Smith met A. Tester at 3.14 p.m. today!",
        "",
        "Wait... what?",
        "See Kokoro in the U.S. soon.",
        "Chapter two",
        "It was late; we left.",
    ]
    assert [c.seed for c in say.chunks if not c.is_pause] == [0, 1, 2, 3, 4, 5]
    assert [c.pause_samples for c in say.chunks] == [0, 0, 12000, 0, 0, 0, 0]
    half = 0.125  # a full stop's pause inside one call is ~250 ms (speech/edges.py)
    assert [(c.lead, c.tail) for c in say.chunks if not c.is_pause] == [
        (None, half),  # the speech's start; a sentence of the paragraph follows
        (half, None),  # the pause tag follows
        (None, half),  # after the pause tag
        (half, None),  # the paragraph ends
        (None, None),  # the heading, a paragraph of its own
        (None, None),  # the last paragraph, one chunk: the model's call as it is
    ]


def test_the_http_server_plans_as_say(planner, say):
    plan = plan_speech(planner, TEXT, VOICE, 1.0, None, voices=VoiceBook(), limits=Limits())
    assert chunks(plan) == chunks(say)


@pytest.mark.parametrize("size", [1, 2, 7, 13, len(TEXT)])
def test_a_wyoming_stream_plans_as_say(planner, say, size):
    """Each complete sentence planned as soon as the text after it has come, as one speech."""
    stream = TextStream(planner, planner.voice(VOICE), speed=1.0, first_chunk_tokens=Limits().first_chunk_tokens)
    plans = []
    for i in range(0, len(TEXT), size):
        if ready := stream.add(TEXT[i : i + size]):
            plans.append(stream.plan(ready, last=False))
    plans.append(stream.plan(stream.rest()))
    assert chunks(*plans) == chunks(say)
    # A plan per sentence as it completes, the last at the end; given at once: the five complete ones, the rest.
    assert len(plans) == (2 if size == len(TEXT) else 6)


@pytest.mark.model
def test_a_book_chapter_plans_as_say(small_artifact, monkeypatch):
    """A one-paragraph chapter is one unit: the chunks `say` makes of its text, each with the book's seed for
    its position."""
    from kokoro_tvm_ext.book.plan import chapter_units, chunk_seed
    from kokoro_tvm_ext.book.render import Reading, render_unit
    from kokoro_tvm_ext.book.sources import Chapter

    speaker = Speaker.load(small_artifact)
    paragraph = "Hello there, my friend. Dr. Smith met A. Tester today! Wait... what? See you soon."
    (unit,) = chapter_units(Chapter("One", (paragraph,)), 3)
    planned, plan = [], speaker.plan
    monkeypatch.setattr(speaker, "plan", lambda *a, **k: planned.append(plan(*a, **k)) or planned[-1])  # a spy
    render_unit(speaker, unit, Reading(speaker.voice(VOICE), 10.0, 7))
    say = plan(paragraph, VOICE, speed=10.0, chunk_seeds=lambda k: chunk_seed(7, 3, 0, k))
    assert chunks(*planned) == chunks(say)
    assert [c.text for c in say.chunks] == ["Hello there, my friend.", "Dr. Smith met A. Tester today!"] + [
        "Wait... what?",
        "See you soon.",
    ]
