"""The benchmarks' inputs come from ``Speaker.plan``: a bench text is one call of every token its plan speaks (the
plan's sentence chunks joined by a space, as the whole phoneme string reads), with the style row KPipeline picks
for that length (``pack[tokens - 1]``)."""

import numpy as np
import pytest
from kokoro_bench.e2e import TEXTS
from kokoro_bench.plans import as_one_call, one_call, planner

from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech import Voice, tokenize

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)


@pytest.fixture(scope="module")
def voice():
    """An English voice whose every style row differs, so the row chosen shows."""
    pack = np.random.default_rng(0).standard_normal((VOICE_PACK_ROWS, 1, STYLE_DIM)).astype(np.float32)
    return Voice("test", pack, "a")


@pytest.mark.parametrize("key", TEXTS)
def test_a_bench_text_is_one_call_of_every_token_its_plan_speaks(voice, key):
    plan = planner().plan(TEXTS[key], voice)
    call = one_call(TEXTS[key], voice)
    np.testing.assert_array_equal(call.tokens, tokenize(" ".join(c.phonemes for c in plan.chunks)))
    assert call.tokens.size == sum(c.tokens.size for c in plan.chunks) + len(plan.chunks) - 1
    np.testing.assert_array_equal(call.style, voice.pack[call.tokens.size - 1])
    assert (call.speed, call.seed) == (1.0, 0)
    print(f"{key}: {call.tokens.size} tokens, planned as {len(plan.chunks)} chunks")


def test_phonemes_planned_again_give_the_same_call(voice):
    """What the e2e workers check: the rows that plan the driver's phonemes get the tokens the peers get."""
    call = one_call(TEXTS["long"], voice)
    again = as_one_call(planner().plan(phonemes=call.phonemes, voice=voice, speed=1.3, seed=7))
    np.testing.assert_array_equal(again.tokens, call.tokens)
    np.testing.assert_array_equal(again.style, call.style)
    assert (again.speed, again.seed) == (pytest.approx(1.3), 7)


def test_a_text_longer_than_one_call_is_refused_in_one_line(voice):
    with pytest.raises(ValueError, match=rf"^benchmark text has \d+ tokens; keep it within {MAX_TOKENS}$"):
        one_call(" ".join([TEXTS["long"]] * 3), voice)
