"""A stand-in model for tests that only plan: enough of one for ``Speaker`` (its rate and context)."""

from __future__ import annotations


class NoModel:
    """Enough of a model to plan with; synthesizing is a test failure."""

    sample_rate = 24000
    max_tokens = 510

    def iter_batch(self, *args):
        raise AssertionError("planning called the model")
