"""The book's job (``book/job.py``: ``BookJob``), not its CLI, holds the resume key, the executor and what it
reads of the artifact: the key follows each setting and the artifact's metadata, and is the key the book kept
before (a work directory of an earlier run still resumes); Ray's executor takes its sample rate from the
artifact's metadata, the local one from the loaded model."""

from __future__ import annotations

import hashlib
import json

import pytest
from fake_speech import SAMPLE_RATE, fake_artifact

from kokoro_tvm_ext.book import job as book_job
from kokoro_tvm_ext.book.output import BookOutput
from kokoro_tvm_ext.book.plan import UNIT_CHARS
from kokoro_tvm_ext.book.resume import settings_key
from kokoro_tvm_ext.speech import Speaker, SpeakerConfig, Voice

pytestmark = pytest.mark.unit


@pytest.fixture
def prepared(tmp_path, monkeypatch):
    monkeypatch.setattr(SpeakerConfig, "resolved", lambda self, **kw: self)  # the artifact as given
    artifact = fake_artifact(tmp_path / "artifact")
    output = BookOutput(str(tmp_path / "book.m4b"), "wav", False)

    def prepare(**options):
        config = SpeakerConfig(artifact=artifact, threads=options.pop("threads", None))
        return book_job.BookJob.prepare(config, Voice.silent("reader", "a"), output, **options)

    return prepare, artifact


def test_the_resume_key_is_the_one_kept_before_and_follows_every_setting(prepared):
    prepare, artifact = prepared
    job = prepare(speed=1.5, seed=3)
    before = settings_key(  # what `kokoro-tvm book` keyed its chapters by before the job held the key
        voice=hashlib.sha256(job.reading.voice.pack.tobytes()).hexdigest(),
        lang="a",
        speed=1.5,
        seed=3,
        unit_chars=UNIT_CHARS,
        artifact=hashlib.sha256((artifact / "meta.json").read_bytes()).hexdigest(),
    )
    assert job.store.settings == before and job.unit_chars == UNIT_CHARS
    others = [prepare(speed=1.0, seed=3), prepare(speed=1.5, seed=4), prepare(speed=1.5, seed=3, unit_chars=99)]
    (artifact / "meta.json").write_text(json.dumps({"sample_rate": SAMPLE_RATE, "library_sha256": "other"}))
    others.append(prepare(speed=1.5, seed=3))  # another compiled model
    keys = {job.store.settings, *(other.store.settings for other in others)}
    assert len(keys) == 5


def test_the_executors_sample_rate_comes_from_the_model_or_the_artifact(prepared, monkeypatch):
    prepare, artifact = prepared
    (artifact / "meta.json").write_text(json.dumps({"sample_rate": 22050}))

    class Model:
        sample_rate = 16000

    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **kw: Model()))
    executor, rate = prepare().open_executor()
    assert isinstance(executor, book_job.LocalExecutor) and rate == 16000

    opened = []
    monkeypatch.setattr(book_job, "RayExecutor", lambda address, config: opened.append((address, config)) or "ray")
    job = prepare(ray="auto", threads=None)
    assert job.open_executor() == ("ray", 22050)
    assert opened == [("auto", job.config)] and job.config.threads == 1  # one thread per Ray task by default
