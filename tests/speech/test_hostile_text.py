"""Hostile text at the entry of the speech pipeline (``Speaker.plan``): every input gets a plan or one of
our errors (never another exception), in time linear in its length, and a server can cancel planning."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from kokoro_tvm_ext.errors import RequestCancelled
from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech.speaker import Speaker, Voice

pytest.importorskip("misaki")

FRENCH = "Le chat de la voisine dort au soleil, puis il mange sa soupe. "


@pytest.fixture(scope="module")
def speaker():
    """Planning needs no model: a stand-in with the two numbers plan reads."""
    return Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))


def voice(lang: str) -> Voice:
    return Voice(f"test-{lang}", np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), lang)


def test_a_set_cancel_event_stops_planning_before_any_g2p(speaker):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(RequestCancelled) as err:
        speaker.plan("Bonjour à tous.", voice("f"), cancel=cancel)
    assert (err.value.http_status, err.value.exit_code) == (499, 130)


def test_cancel_interrupts_a_long_plan(speaker):
    """Set from another thread while one long paragraph is being read: the plan stops within a second."""
    text = FRENCH * 150 + "Il est 12 heures."
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    start = time.perf_counter()
    try:
        with pytest.raises(RequestCancelled):
            speaker.plan(text, voice("f"), cancel=cancel)
    finally:
        timer.cancel()
    assert time.perf_counter() - start < 1.5
    assert speaker.plan("Bonjour à tous.", voice("f"), cancel=threading.Event()).chunks  # an unset event: no effect
