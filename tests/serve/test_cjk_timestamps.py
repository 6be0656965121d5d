"""/dev/captioned_speech in Japanese and Mandarin: each timestamp is its word as written (the input's ！ and
digits, not the G2P's ! and readings), the words joined without spaces are the input, times still in order."""

from __future__ import annotations

import json
import re

import pytest
from test_captions import captioned

TEXTS = {
    "jf_alpha": "今日はいい天気ですね。「速い」と彼は言った！3つあります。",
    "zf_xiaobei": "你好，世界？2024年有365天。",
}


def check(times, text):
    words = [t["word"] for t in times]
    assert "".join(words) == text and all(w and " " not in w for w in words) and len(words) > 5
    # space_after: a client joining the words itself puts no space between them where the input has none
    assert joined(times) == text
    for a, b in zip(times, times[1:]):
        assert a["start_time"] <= a["end_time"] <= b["start_time"] + 1e-9


def joined(times) -> str:
    return "".join(t["word"] + (" " if t["space_after"] else "") for t in times).strip()


@pytest.mark.parametrize("voice, text", TEXTS.items())
def test_one_shot_timestamps_are_the_words_as_written(server, voice, text):
    r = captioned(server, input=text, voice=voice, stream=False)
    assert r.status_code == 200, r.text
    check(r.json()["timestamps"], text)


@pytest.mark.parametrize("voice, text", TEXTS.items())
def test_streamed_timestamps_are_the_words_as_written(server, voice, text):
    r = captioned(server, input=text, voice=voice, stream=True)
    assert r.status_code == 200, r.text
    lines = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert len(lines) > 1  # a chunk each sentence: each line carries its own words
    check([t for line in lines for t in line["timestamps"]], text)


@pytest.mark.parametrize("voice, suffix", [("jf_alpha", ".vtt"), ("zf_xiaobei", ".srt")])
def test_say_subtitles_are_the_sentences_as_written(artifact, voice, suffix, tmp_path):
    from test_say_subtitles import run_say

    subtitles = tmp_path / f"out{suffix}"
    result = run_say(artifact, voice, TEXTS[voice], "-o", str(tmp_path / "out.wav"), "--subtitles", str(subtitles))
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    cues = re.findall(r"--> \S+\n(.+)\n", subtitles.read_text())
    assert cues == re.findall(r".+?[。！？]", TEXTS[voice])  # a cue a sentence, as typed
