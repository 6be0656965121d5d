"""Fixtures for the speaker encoder's tests: the compiled encoder, PyTorch's Resemblyzer, real speech."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
ALSA_SOUNDS = Path("/usr/share/sounds/alsa")
# The channel names spoken by a person (Noise.wav is noise).
ALSA_VOICES = ("Front_Center", "Front_Left", "Front_Right", "Rear_Center", "Rear_Left", "Rear_Right", "Side_Left")


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    import soundfile

    wav, rate = soundfile.read(str(path), dtype="float32")
    return wav, rate


@pytest.fixture(scope="session")
def encoder():
    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder

    return SpeakerEncoder.load()


@pytest.fixture(scope="session")
def resemblyzer():
    """The reference: PyTorch's Resemblyzer (the [dev] extra), with its own preprocessing functions."""
    pytest.importorskip("torch")
    with warnings.catch_warnings():  # webrtcvad imports pkg_resources
        warnings.simplefilter("ignore")
        rz = pytest.importorskip("resemblyzer")
    return rz


@pytest.fixture(scope="session")
def reference(resemblyzer):
    return resemblyzer.VoiceEncoder("cpu", verbose=False)


@pytest.fixture(scope="session")
def kokoro_clips() -> dict[str, tuple[np.ndarray, int]]:
    """Kokoro's speech at 24 kHz, 1.6, 4.3 and 9.6 s (data/README.md)."""
    return {path.stem: read_audio(path) for path in sorted(DATA.glob("*.flac"))}


@pytest.fixture(scope="session")
def human_clips(tmp_path_factory) -> list[tuple[np.ndarray, int]]:
    """A person naming ALSA's channels (48 kHz, ~1.4 s each), from Debian's alsa-utils."""
    from system_tools import require

    require(*(str(ALSA_SOUNDS / f"{name}.wav") for name in ALSA_VOICES))
    return [read_audio(ALSA_SOUNDS / f"{name}.wav") for name in ALSA_VOICES]


@pytest.fixture(scope="session")
def jfk() -> tuple[np.ndarray, int]:
    """John F. Kennedy's inaugural address, 11 s at 16 kHz (public domain; tests/public_speech.py)."""
    from public_speech import jfk_recording

    path = jfk_recording()
    if isinstance(path, str):
        pytest.skip(path)
    return read_audio(path)
