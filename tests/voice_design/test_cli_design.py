"""`kokoro-tvm voices` keeps listing as before, lists a voices directory, and `voices design` teaches and refuses
before reading anything (in process: cli.main)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.speech.voices import load_voice, packs, save_voice


@pytest.fixture(autouse=True)
def no_dirs(monkeypatch):  # tests/conftest.py empties the added directories
    monkeypatch.delenv(packs.VOICES_ENV, raising=False)


def test_the_list_is_unchanged(capsys):
    assert main(["voices", "--lang", "fr"]) == 0
    assert capsys.readouterr().out.split() == ["ff_siwis", "f", "fr", "French", "female", "kokoro-0.9.4-sdist"]
    assert main(["voices"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 54


def test_the_list_shows_a_voices_directory(capsys, tmp_path, monkeypatch):
    save_voice(tmp_path / "narrator.npy", load_voice("bf_emma"), {"language": "b"})
    monkeypatch.setenv(packs.VOICES_ENV, str(tmp_path))
    assert main(["voices", "--lang", "en-gb"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.strip().splitlines()}
    assert rows["narrator"][1:3] == ["b", "en-gb"] and rows["narrator"][-1] == "voices-dir"
    assert len(rows) == 9  # bf_* and bm_* (8) and this one


def test_design_help_teaches(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["voices", "design", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for needle in ("--steps", "--minutes", "--seed", "design-state", "examples:", 'say "Hello there." --voice me.npy'):
        assert needle in out, needle


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "voice.wav"], "a designed voice is written as NAME.npy"),
        (["-o", "voice.npy", "--steps", "3"], "--steps must be at least one generation (8 candidates)"),
        (["-o", "voice.npy", "--minutes", "0"], "--minutes must be a positive number"),
        (["-o", "voice.npy", "--lang", "xx"], "xx"),
    ],
)
def test_design_refuses_bad_options_in_one_line(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    t = np.arange(5 * 16000) / 16000
    sf.write("me.wav", (0.1 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), 16000)
    assert main(["voices", "design", "me.wav", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["me.wav"]


@pytest.mark.parametrize("kept", ["search", "start"])
def test_design_says_what_it_wrote(capsys, tmp_path, monkeypatch, kept):
    # What the command prints from a design's result (the design itself: test_design.py, on the real weights).
    from types import SimpleNamespace

    from kokoro_tvm_ext.cli import voices as voices_command

    provenance = {"kept": kept, "score": {"similarity": 0.81234}}
    result = SimpleNamespace(path=tmp_path / "me.npy", state=SimpleNamespace(evaluations=240), sidecar={})
    result.sidecar["provenance"] = provenance
    monkeypatch.setattr(voices_command, "design", lambda *args, **kwargs: result)
    assert main(["voices", "design", "me.wav", "-o", str(tmp_path / "me.npy"), "--steps", "8"]) == 0
    out, err = capsys.readouterr()
    assert "similarity 0.812 to the recordings (on sentences the search never spoke) after 240 candidates" in out
    assert ("the voice written is the nearest stock voices' blend" in err) == (kept == "start")


def test_a_state_saved_by_another_version_is_refused_in_one_line(capsys, tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(tmp_path)
    t = np.arange(5 * 16000) / 16000
    sf.write("me.wav", (0.1 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), 16000)
    with open("me.npy.design-state", "wb") as f:
        pickle.dump((0, {"what": "a state of another format"}), f)
    assert main(["voices", "design", "me.wav", "-o", "me.npy", "--steps", "8"]) == 2
    err = capsys.readouterr().err
    assert "holds a design saved by another version of kokoro-tvm-ext; delete it to start this one" in err
    assert len(err.strip().splitlines()) == 1 and sorted(p.name for p in tmp_path.iterdir()) == [
        "me.npy.design-state",
        "me.wav",
    ]
