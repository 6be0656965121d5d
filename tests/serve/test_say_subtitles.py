"""`kokoro-tvm say --subtitles`: cues at the word times the durations give (VTT rendering: test_timestamps)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import SPEED
from kokoro_harness.server import source_env
from test_captions import FRAME, TEXT, expected_times

sf = pytest.importorskip("soundfile")


def run_say(artifact, voice, *args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kokoro_tvm_ext.cli",
            "say",
            *args,
            "--artifact",
            str(artifact),
            "--voice",
            voice,
            "--speed",
            str(SPEED),
        ],
        env=source_env(),
        capture_output=True,
        timeout=600,
    )


def seconds(clock: str) -> float:
    h, m, s = clock.replace(",", ".").split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def test_srt_cues_follow_the_durations(artifact, voice, runtime, tmp_path):
    wav, srt = tmp_path / "out.wav", tmp_path / "out.srt"
    result = run_say(artifact, voice, TEXT, "-o", str(wav), "--subtitles", str(srt))
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    cues = re.findall(r"(\d+)\n(\S+) --> (\S+)\n(.+)\n", srt.read_text())
    assert [c[3] for c in cues] == ["Hello there, my friend.", "See you soon!"]
    words = expected_times(runtime, voice)  # say's chunks are the server's
    firsts = [words[0], words[6]]  # "Hello", "See"
    lasts = [words[5], words[-1]]  # ".", "!"
    for (_, start, end, _), first, last in zip(cues, firsts, lasts):
        assert abs(seconds(start) - first[1]) <= FRAME and abs(seconds(end) - last[2]) <= FRAME
    audio, rate = sf.read(wav)
    assert seconds(cues[-1][2]) <= len(audio) / rate


def test_bad_subtitle_path_fails_before_writing_anything(artifact, voice, tmp_path):
    bad = run_say(artifact, voice, "Hi.", "-o", str(tmp_path / "b.wav"), "--subtitles", str(tmp_path / "x.txt"))
    assert bad.returncode == 2 and b".srt or .vtt" in bad.stderr  # an input error
    assert not (tmp_path / "b.wav").exists()
