"""The recordings `voices design` refuses, each in one line with exit 2 and nothing written, and the bounded read of a
long file. The audio is made here with numpy and written by soundfile (libsndfile), the reference decoder."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile as sf

from kokoro_tvm_ext.speech.voice_design.recordings import (
    MAX_SECONDS,
    RATE,
    read_recording,
    read_recordings,
    speech_seconds,
)
from kokoro_tvm_ext.support.errors import InvalidInputError


def _voiced(seconds: float, rate: int) -> np.ndarray:
    """A vowel-like sound: a 140 Hz pulse train's harmonics at speech level (RMS ~0.1)."""
    t = np.arange(int(seconds * rate)) / rate
    wave = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 20))
    return (0.1 * wave / np.sqrt(np.mean(wave**2))).astype(np.float32)


@pytest.fixture
def bad(tmp_path):
    files = {}
    (tmp_path / "notes.wav").write_text("this is not audio\n")
    files["not audio"] = (tmp_path / "notes.wav", "is not audio PyAV can read")
    sf.write(tmp_path / "silence.flac", np.zeros(5 * 24000, np.float32), 24000)
    files["silence"] = (tmp_path / "silence.flac", "is silent")
    short = np.concatenate([_voiced(0.3, 24000), np.zeros(4 * 24000, np.float32)])
    sf.write(tmp_path / "short.wav", short, 24000)
    files["0.3 s of speech"] = (tmp_path / "short.wav", r"holds 0.3 s of speech; give at least 3 s")
    sf.write(tmp_path / "phone.wav", _voiced(6, 8000), 8000)
    files["8 kHz"] = (tmp_path / "phone.wav", "is sampled at 8000 Hz; the speaker encoder needs at least 16000 Hz")
    return files


@pytest.mark.parametrize("case", ["not audio", "silence", "0.3 s of speech", "8 kHz"])
def test_a_bad_recording_is_refused_by_name(bad, case):
    path, message = bad[case]
    with pytest.raises(InvalidInputError, match=message):
        read_recording(path)


@pytest.mark.parametrize("case", ["not audio", "silence", "0.3 s of speech", "8 kHz"])
def test_the_command_refuses_in_one_line_and_writes_nothing(bad, case, tmp_path):
    path, message = bad[case]
    out = tmp_path / "out" / "voice.npy"
    out.parent.mkdir()
    env = {**os.environ, "KOKORO_TVM_CACHE": str(tmp_path / "cache")}  # nothing is loaded before the refusal
    command = [sys.executable, "-m", "kokoro_tvm_ext.cli", "voices", "design", str(path), "-o", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert path.name in lines[0], lines[0]
    assert list(out.parent.iterdir()) == []
    assert not (tmp_path / "cache" / "speaker-encoder").exists()


def test_a_two_hour_file_is_read_only_for_its_first_ten_minutes(tmp_path):
    """Two hours of FLAC (speech-like sound for 5 s, then quiet hum): only MAX_SECONDS are decoded, quickly."""
    path = tmp_path / "long.flac"
    rate = 16000
    with sf.SoundFile(path, "w", rate, 1, format="FLAC") as f:
        f.write(_voiced(5, rate))
        block = np.zeros(60 * rate, np.float32)
        for _ in range(120):
            f.write(block)
    start = time.perf_counter()
    rec = read_recording(path)
    seconds = time.perf_counter() - start
    assert rec.truncated and len(rec.audio) == int(MAX_SECONDS * RATE)
    assert 4.5 <= rec.speech_seconds <= 5.5  # the voiced part, measured by RMS
    assert seconds < 60, seconds


def test_any_rate_and_format_is_decoded_to_the_encoders_rate(tmp_path):
    """44.1 kHz MP3 (through PyAV's encoder) and 24 kHz WAV: 16 kHz mono of the same length."""
    import av

    wav = tmp_path / "a.wav"
    sf.write(wav, _voiced(4, 24000), 24000)
    mp3 = tmp_path / "a.mp3"
    audio = _voiced(4, 44100)
    with av.open(str(mp3), "w") as container:
        stream = container.add_stream("mp3", rate=44100, layout="mono")
        frame = av.AudioFrame.from_ndarray(audio[None, :], format="flt", layout="mono")
        frame.sample_rate = 44100
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    for path, rate in ((wav, 24000), (mp3, 44100)):
        rec = read_recording(path)
        assert rec.source_rate == rate
        assert abs(len(rec.audio) / RATE - 4.0) < 0.1, len(rec.audio)
        assert 3.8 <= rec.speech_seconds <= 4.1


def test_speech_seconds_counts_loud_frames():
    """Hand-computed: 1 s of sound then 2 s of silence at 16 kHz, in frames of 480 samples: 33 frames wholly sound,
    the 34th a third sound (RMS 0.1 / sqrt(3), still louder than -45 dBFS): 34 x 30 ms."""
    audio = np.concatenate([_voiced(1.0, RATE), np.zeros(2 * RATE, np.float32)])
    assert speech_seconds(audio) == pytest.approx(34 * 0.03)


def test_short_clips_of_one_voice_count_together(tmp_path):
    """Two 2-second clips pass together (4 s of speech), not alone; two 1-second clips do not."""
    for name, seconds in (("a", 2.0), ("b", 2.0), ("c", 1.0), ("d", 1.0)):
        sf.write(tmp_path / f"{name}.wav", _voiced(seconds, 24000), 24000)
    recs = read_recordings([tmp_path / "a.wav", tmp_path / "b.wav"])
    assert sum(r.speech_seconds for r in recs) == pytest.approx(4.0, abs=0.1)
    with pytest.raises(InvalidInputError, match="holds 2.0 s of speech; give at least 3 s"):
        read_recordings([tmp_path / "a.wav"])
    with pytest.raises(InvalidInputError, match="the 2 recordings hold 2.0 s of speech together; give at least 3 s"):
        read_recordings([tmp_path / "c.wav", tmp_path / "d.wav"])
    with pytest.raises(InvalidInputError, match="is silent"):
        sf.write(tmp_path / "quiet.wav", np.zeros(24000, np.float32), 24000)
        read_recordings([tmp_path / "a.wav", tmp_path / "b.wav", tmp_path / "quiet.wav"])
