"""A new front end needs the config, one constructor and the writer, nothing else: here a speaker that reads text on
standard input and writes a WAV to standard output, in a process of its own, against ``Speaker.speak`` in this
one (the samples every front end gives for the same text)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

import kokoro_tvm_ext

pytestmark = pytest.mark.model

SPEED = 10.0  # random weights: ~25 frames a token at speed 1
TEXT = "A new front end. It reads standard input, and writes a WAV!"

# The whole front end: parse (nothing to parse here), open, speak, encode.
STDIN_SPEAKER = """
import sys
from kokoro_tvm_ext.speech import Speaker, SpeakerConfig
from kokoro_tvm_ext.speech.audio import encode_audio

speaker = Speaker.open(SpeakerConfig(artifact=sys.argv[1]))
speech = speaker.speak(sys.stdin.read(), "af_heart", speed=float(sys.argv[2]))
sys.stdout.buffer.write(encode_audio([speech.audio], speech.sample_rate, "wav"))
"""


def decoded_wav(data: bytes) -> np.ndarray:
    with av.open(io.BytesIO(data)) as container:
        return np.concatenate([frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)])


def test_a_stdin_to_stdout_speaker_gives_the_pipelines_samples(small_artifact):
    from kokoro_tvm_ext.speech import Speaker, SpeakerConfig
    from kokoro_tvm_ext.speech.audio import to_int16

    env = {"PYTHONPATH": str(Path(kokoro_tvm_ext.__file__).resolve().parents[1]), "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", STDIN_SPEAKER, str(small_artifact), str(SPEED)],
        input=TEXT.encode(),
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    want = Speaker.open(SpeakerConfig(artifact=small_artifact)).speak(TEXT, "af_heart", speed=SPEED)
    got = decoded_wav(done.stdout)
    assert got.dtype == np.int16 and len(got) == len(want.audio) > 0
    np.testing.assert_array_equal(got, to_int16(want.audio))
