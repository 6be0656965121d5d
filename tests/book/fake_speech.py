"""A stand-in for the model in book tests about files, not sound: each unit "speaks" a pattern of
samples whose length follows its text (10 ms a character), so a test runs in milliseconds and knows
every sample it should find in the output. ``patch_model(setattr)`` puts it in place of the Speaker
and the local executor, for ``monkeypatch.setattr`` in a test or plain ``setattr`` in a subprocess."""

from __future__ import annotations

import json

import numpy as np

SAMPLE_RATE = 24000


def unit_samples(unit) -> np.ndarray:
    n = unit.chars * SAMPLE_RATE // 100
    return ((np.arange(n) * (7 + unit.chapter) + 100 * unit.index) % 2000 - 1000).astype(np.int16)


class FakeExecutor:
    asked: list = []  # every unit asked for in this process, across instances

    def __init__(self, speaker=None):
        pass

    def run(self, units, reading):
        from kokoro_tvm_ext.book.render import UnitAudio
        from kokoro_tvm_ext.speech import Speech
        from kokoro_tvm_ext.speech.timestamps import WordTiming

        for unit in units:
            FakeExecutor.asked.append(unit.key)
            samples = unit_samples(unit)
            words = [WordTiming("word", 0.0, len(samples) / SAMPLE_RATE, False)]
            yield UnitAudio(unit.key, Speech(samples, SAMPLE_RATE, words))

    def close(self):
        pass


class FakeSpeaker:
    sample_rate = SAMPLE_RATE


def fake_artifact(directory):
    """A directory that passes for an artifact with the fakes in place (the book hashes its meta.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "meta.json").write_text(json.dumps({"sample_rate": SAMPLE_RATE}))
    return directory


def patch_model(setattr) -> None:
    import kokoro_tvm_ext.book.job as book_job
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig

    setattr(Speaker, "open", classmethod(lambda cls, config=None, **kw: FakeSpeaker()))
    setattr(SpeakerConfig, "resolved", lambda self, **kw: self)  # the fake artifact is used as it is given
    setattr(book_job, "LocalExecutor", FakeExecutor)


def chapter_samples(chapter, index: int, unit_chars: int) -> np.ndarray:
    """What the fakes speak for a whole chapter."""
    from kokoro_tvm_ext.book.plan import chapter_units

    return np.concatenate([unit_samples(u) for u in chapter_units(chapter, index, unit_chars)])
