"""The encoder without torch: fetched, compiled and run in processes where torch (and Resemblyzer's librosa and
webrtcvad) cannot be imported, as with the [design] extra alone; and compiled in a child process when TVM was
imported runtime-only (a KokoroTVM loaded first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kokoro_tvm_ext.model.speaker_encoder import preprocess

# A compiled encoder in every test (the model tier: tests/conftest.py).
pytestmark = pytest.mark.model

HIDDEN = ("torch", "librosa", "webrtcvad", "resemblyzer")

SCRIPT = """
import json, sys
for name in {hidden!r}:
    sys.modules[name] = None  # import fails, as if not installed
if {runtime_only!r}:
    from kokoro_tvm_ext.model.runtime.tvm_runtime import import_tvm
    import_tvm()  # TVM's runtime alone, as a KokoroTVM loaded first leaves it
import numpy as np
from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
wav = np.load(sys.argv[1])
embedding = SpeakerEncoder.load(threads=1).embed(wav, 16000, trim=False)
maps = open("/proc/self/maps").read()
print(json.dumps({{
    "embedding": embedding.tolist(),
    "torch": "libtorch" in maps or any(m.startswith("torch") for m in sys.modules if sys.modules[m] is not None),
    "compiler": "libtvm_compiler" in maps,
}}))
"""


def _run(tmp_path: Path, wav16: np.ndarray, env: dict, runtime_only: bool) -> dict:
    wav_file = tmp_path / "speech.npy"
    np.save(wav_file, wav16)
    script = SCRIPT.format(hidden=HIDDEN, runtime_only=runtime_only)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, str(wav_file)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def speech_and_reference(kokoro_clips, resemblyzer, reference):
    wav, rate = kokoro_clips["medium_am_adam"]
    wav16 = preprocess.resample(wav, rate)
    return wav16, reference.embed_utterance(resemblyzer.audio.normalize_volume(wav16, -30, increase_only=True))


@pytest.mark.parametrize("runtime_only", [False, True], ids=["compiled-in-process", "compiled-in-a-child"])
def test_fetched_compiled_and_run_without_torch(tmp_path, resemblyzer, speech_and_reference, runtime_only):
    wav16, expected = speech_and_reference
    env = {
        "KOKORO_TVM_CACHE": str(tmp_path / "cache"),  # nothing cached: weights read and library compiled here
        "KOKORO_TVM_RESEMBLYZER": str(Path(resemblyzer.__file__).parent / "pretrained.pt"),
    }
    out = _run(tmp_path, wav16, env, runtime_only)
    assert not out["torch"]
    assert out["compiler"] is not runtime_only  # runtime-only: the compile ran in a child process
    assert np.abs(np.array(out["embedding"]) - expected).max() < 1e-4
    assert list((tmp_path / "cache" / "artifacts").glob("speaker-encoder-*/encoder.so"))


def test_a_damaged_library_is_compiled_again(tmp_path, monkeypatch, resemblyzer, speech_and_reference):
    from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder
    from kokoro_tvm_ext.model.speaker_encoder.compile import LIBRARY, ensure_encoder_artifact

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KOKORO_TVM_RESEMBLYZER", str(Path(resemblyzer.__file__).parent / "pretrained.pt"))
    # Compiled, not loaded: overwriting a library this process has mapped would crash it.
    library = ensure_encoder_artifact() / LIBRARY
    library.write_bytes(library.read_bytes()[:1000])  # truncated: its sha256 no longer matches meta.json
    wav16, expected = speech_and_reference
    embedding = SpeakerEncoder.load().embed(wav16, 16000, trim=False)
    assert np.abs(embedding - expected).max() < 1e-4
