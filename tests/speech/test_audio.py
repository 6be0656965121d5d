"""The one audio writer (speech/audio.py) without a model: its 16-bit conversion against hand-computed values, a
file in one piece or none, and what each format can carry. Each format's samples and container, decoded by FFmpeg,
are checked where they are made: `say` (tests/test_cli.py), the server (tests/serve/test_speech.py) and the book
(tests/book/)."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech.audio import Chapter, StreamEncoder, encode_audio, to_int16, write_audio

av = pytest.importorskip("av")


def test_to_int16_clips_and_rounds_to_the_nearest_step():
    audio = np.array([0.0, 1.0, -1.0, 1.5, -2.0, 0.5, -0.5, 1 / 32767 * 0.49, 1 / 32767 * 0.51], np.float32)
    assert to_int16(audio).tolist() == [0, 32767, -32767, 32767, -32767, 16384, -16384, 0, 1]


def test_int16_samples_are_written_as_they_are():
    samples = np.random.default_rng(0).integers(-32768, 32768, 5000).astype(np.int16)
    data = encode_audio([samples[:1234], samples[1234:]], 24000, "flac")
    with av.open(io.BytesIO(data)) as container:
        decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    np.testing.assert_array_equal(decoded, samples)


def test_a_write_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path):
    out = tmp_path / "out.mp3"
    out.write_bytes(b"the previous file")

    def pieces():
        yield np.zeros(24000, np.float32)
        raise OSError("the disk is full")

    with pytest.raises(OSError, match="the disk is full"):
        write_audio(out, pieces(), 24000)
    assert [p.name for p in tmp_path.iterdir()] == ["out.mp3"]
    assert out.read_bytes() == b"the previous file"


def test_chapters_only_in_formats_that_carry_them():
    with pytest.raises(InvalidInputError, match="^wav files cannot carry chapter markers; mp3, m4a can$"):
        encode_audio([np.zeros(10, np.float32)], 24000, "wav", chapters=[Chapter("One", 0, 10)])
    with pytest.raises(InvalidInputError, match="^m4a cannot be streamed: its index is written last$"):
        StreamEncoder("m4a", 24000)
    with pytest.raises(InvalidInputError, match="^unknown audio format 'ogg'; choose one of wav, flac, mp3,"):
        StreamEncoder("ogg", 24000)


def test_a_wav_file_needs_no_pyav_and_carries_the_samples_a_streamed_wav_does(tmp_path, monkeypatch):
    samples = np.random.default_rng(1).integers(-32768, 32768, 30001).astype(np.int16)
    streamed = StreamEncoder("wav", 24000)  # no seek: PyAV, with "until the end" sizes
    stream_bytes = streamed.encode(samples[:7000]) + streamed.encode(samples[7000:]) + streamed.finish()
    with monkeypatch.context() as blocked:
        blocked.setitem(sys.modules, "av", None)  # `import av` raises ImportError
        write_audio(tmp_path / "out.wav", [samples[:123], samples[123:]], 24000)
    for data in ((tmp_path / "out.wav").read_bytes(), stream_bytes):
        with av.open(io.BytesIO(data)) as container:
            assert container.streams.audio[0].sample_rate == 24000
            decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
        np.testing.assert_array_equal(decoded, samples)
