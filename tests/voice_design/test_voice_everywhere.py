"""A voice file of your own spoken everywhere a voice name goes: `say` (its language from the sidecar), a blend, and a
server over a real socket with --voices-dir (listed, by name, in a blend). The file is a stock pack saved with its
sidecar, so the reference is that stock voice spoken by name: the same bytes. The session's small random-weights
artifact speaks (at speed 4, short)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from kokoro_harness.server import source_env

from kokoro_tvm_ext.speech.voices import load_voice, save_voice

pytestmark = pytest.mark.integration
SPEED = "4"


@pytest.fixture(scope="module")
def voices(tmp_path_factory) -> Path:
    """narrator.npy = bf_emma's pack (British English), hola.npy = ef_dora's (Spanish), bare.npy without a sidecar."""
    directory = tmp_path_factory.mktemp("voices")
    save_voice(directory / "narrator.npy", load_voice("bf_emma"), {"language": "b"})
    save_voice(directory / "hola.npy", load_voice("ef_dora"), {"language": "e"})
    save_voice(directory / "bare.npy", load_voice("af_heart"), {"language": "a"})
    (directory / "bare.json").unlink()
    return directory


def _say(artifact, out: Path, text: str, voice: str, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", text, "-o", str(out), "--artifact", str(artifact)]
    command += ["--speed", SPEED, "--voice", voice, *extra]
    return subprocess.run(command, capture_output=True, text=True, env=source_env(), timeout=300)


@pytest.mark.parametrize(
    ("text", "ours", "stock"),
    [
        ("Good morning, everyone.", "{dir}/narrator.npy", "bf_emma"),
        ("Buenos días a todos.", "{dir}/hola.npy", "ef_dora"),
        ("Good morning, everyone.", "af_heart:0.5,{dir}/narrator.npy:0.5", "af_heart:0.5,bf_emma:0.5"),
        ("Good morning, everyone.", "{dir}/narrator.npy(1)+af_heart(3)", "bf_emma(1)+af_heart(3)"),
    ],
)
def test_say_speaks_a_voice_file_in_its_sidecars_language(small_artifact, voices, tmp_path, text, ours, stock):
    mine, theirs = tmp_path / "mine.wav", tmp_path / "theirs.wav"
    first = _say(small_artifact, mine, text, ours.format(dir=voices))
    assert first.returncode == 0, first.stderr[-2000:]
    second = _say(small_artifact, theirs, text, stock)
    assert second.returncode == 0, second.stderr[-2000:]
    assert mine.read_bytes() == theirs.read_bytes()


def test_say_without_a_sidecar_asks_for_the_language(small_artifact, voices, tmp_path):
    out = tmp_path / "out.wav"
    result = _say(small_artifact, out, "Hello.", str(voices / "bare.npy"))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "bare.npy has no bare.json beside it" in result.stderr and "--lang" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    given = _say(small_artifact, out, "Hello.", str(voices / "bare.npy"), "--lang", "a")
    assert given.returncode == 0 and out.exists(), given.stderr[-2000:]


def test_say_names_a_voice_of_a_voices_directory(small_artifact, voices, tmp_path):
    mine, theirs = tmp_path / "mine.wav", tmp_path / "theirs.wav"
    command = [sys.executable, "-m", "kokoro_tvm_ext.cli", "say", "Good morning.", "-o", str(mine)]
    command += ["--artifact", str(small_artifact), "--speed", SPEED, "--voice", "narrator"]
    result = subprocess.run(command, capture_output=True, text=True, env=source_env({"KOKORO_TVM_VOICES": str(voices)}))
    assert result.returncode == 0, result.stderr[-2000:]
    assert _say(small_artifact, theirs, "Good morning.", "bf_emma").returncode == 0
    assert mine.read_bytes() == theirs.read_bytes()


@pytest.fixture(scope="module")
def server(small_artifact, voices, tmp_path_factory):
    from kokoro_harness.server import running_server

    log_path = tmp_path_factory.mktemp("serve") / "server.log"
    with running_server(small_artifact, log_path, "--voices-dir", str(voices)) as (_, url):
        yield url


def _speech(url: str, voice: str, text: str = "Good morning, everyone.") -> bytes:
    body = {"input": text, "voice": voice, "response_format": "wav", "speed": float(SPEED)}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.content


def test_the_server_lists_its_voices_directory(server):
    listed = {v["id"]: v for v in httpx.get(f"{server}/v1/audio/voices", timeout=30).json()["voices"]}
    assert listed["narrator"]["language"] == "en-gb" and listed["hola"]["language"] == "es"
    assert "af_heart" in listed


def test_the_server_speaks_a_voices_directory_voice_by_name_and_in_blends(server):
    assert _speech(server, "narrator") == _speech(server, "bf_emma")
    assert _speech(server, "hola", "Buenos días.") == _speech(server, "ef_dora", "Buenos días.")
    assert _speech(server, "narrator:0.5,af_heart:0.5") == _speech(server, "bf_emma:0.5,af_heart:0.5")
    assert _speech(server, "narrator(1)+af_heart(1)") == _speech(server, "bf_emma(1)+af_heart(1)")


def test_the_server_does_not_read_paths_from_a_request(server, voices):
    body = {"input": "Hi.", "voice": str(voices / "narrator.npy"), "response_format": "wav"}
    response = httpx.post(f"{server}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code in (400, 404), response.text
