"""/dev/captioned_speech: the words of the input, in order, at the times the durations give."""

from __future__ import annotations

import base64
import json
import re

import httpx
import numpy as np
import pytest
from conftest import SAMPLE_RATE, SAMPLES_PER_FRAME, SPEED

TEXT = "Hello there, my friend. See you soon!"
FRAME = SAMPLES_PER_FRAME / SAMPLE_RATE


def captioned(server, **body):
    body = {"speed": SPEED, "response_format": "pcm", **body}
    return httpx.post(f"{server}/dev/captioned_speech", json=body, timeout=120)


@pytest.fixture(scope="module")
def one_shot(server, voice):
    r = captioned(server, input=TEXT, voice=voice, stream=False)
    assert r.status_code == 200, r.text
    return r.json()


def expected_times(runtime, voice, text=TEXT, seed=0):
    """Word (start, end) in seconds, by hand from each chunk's durations: a word runs from the
    middle of the space before it to the middle of the space after it (KPipeline's rule). The chunks
    are those of every front end (a sentence each, the first cut after its first clause)."""
    from kokoro_tvm_ext.speech import load_config, load_voice, style_for, tokenize
    from kokoro_tvm_ext.speech.chunks import Chunk, text_chunks

    vocab = load_config()["vocab"]
    pack = load_voice(voice)
    out, offset = [], 0
    for i, chunk in enumerate(c for c in text_chunks(text, "a", vocab) if isinstance(c, Chunk)):
        tokens = tokenize(chunk.phonemes, vocab)
        _, dur = runtime.synthesize(
            np.array(tokens, np.int64), style_for(pack, len(tokens)), speed=SPEED, noise_seed=seed + i
        )
        ends = offset + np.cumsum(dur)  # frame where each id ends; ids: BOS, tokens..., EOS
        pos = 0  # tokens consumed so far
        for j, w in enumerate(chunk.words):
            n = len(tokenize(w.phonemes, vocab))
            before = pos > 0 and chunk.words[j - 1].space_after  # a space token precedes this word
            start = ends[pos] - (dur[pos] / 2 if before else 0)
            pos += n
            end = ends[pos]
            if w.space_after:
                pos += 1
                end += dur[pos] / 2
            out.append((w.text, start * FRAME, end * FRAME))
        offset += int(dur.sum())
    return out


def test_words_are_the_input_words_in_order(one_shot):
    words = [t["word"] for t in one_shot["timestamps"]]
    assert words == re.findall(r"\w+|[^\w\s]", TEXT)


def test_words_joined_by_their_space_after_are_the_input(one_shot, server, voice):
    from test_cjk_timestamps import joined

    # Kokoro-FastAPI's three fields, whether a space follows, and the voice that spoke it (docs/markup.md)
    assert set(one_shot["timestamps"][0]) == {"word", "start_time", "end_time", "space_after", "voice"}
    assert joined(one_shot["timestamps"]) == TEXT
    text = "Une phrase, puis une autre. Encore une !"  # French: its space before "!" is in the input
    r = captioned(server, input=text, voice="ff_siwis", stream=True)
    assert r.status_code == 200, r.text
    lines = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert joined([t for line in lines for t in line["timestamps"]]) == text


def test_times_are_monotonic_and_within_the_audio(one_shot):
    times = one_shot["timestamps"]
    duration = len(base64.b64decode(one_shot["audio"])) / 2 / SAMPLE_RATE
    assert one_shot["audio_format"] == "pcm"
    for t in times:
        assert 0 <= t["start_time"] <= t["end_time"]
    for a, b in zip(times, times[1:]):
        assert a["end_time"] <= b["start_time"] + 1e-9
    assert times[-1]["end_time"] <= duration


def test_each_time_is_within_one_frame_of_the_durations(one_shot, runtime, voice):
    want = expected_times(runtime, voice)
    got = one_shot["timestamps"]
    assert [w for w, _, _ in want] == [t["word"] for t in got]
    for (word, start, end), t in zip(want, got):
        assert abs(t["start_time"] - start) <= FRAME and abs(t["end_time"] - end) <= FRAME, (word, t, start, end)


def test_streamed_captions_come_per_chunk_and_add_up_to_the_one_shot(server, voice, one_shot):
    with httpx.stream(
        "POST",
        f"{server}/dev/captioned_speech",
        timeout=120,
        json={"input": TEXT, "voice": voice, "response_format": "pcm", "speed": SPEED},
    ) as r:
        assert r.status_code == 200
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    assert len(lines) >= 2
    audio = b"".join(base64.b64decode(line["audio"]) for line in lines)
    assert audio == base64.b64decode(one_shot["audio"])
    assert [t for line in lines for t in line["timestamps"]] == one_shot["timestamps"]


def test_return_timestamps_false_gives_audio_only(server, voice):
    r = captioned(server, input="Hi.", voice=voice, stream=False, return_timestamps=False)
    assert r.status_code == 200 and r.json()["timestamps"] is None and r.json()["audio"]
