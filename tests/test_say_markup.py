"""``say`` with voice tags, aliases, a cast file and SSML: bad markup and hostile documents exit 2 with one line
before anything slow and write nothing; a tagged text and its SSML give the same file, sample for sample."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import soundfile as sf

from kokoro_tvm_ext.cli import main

BILLION_LAUGHS = '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><speak>&b;</speak>'


@pytest.mark.parametrize(
    "argv, message",
    [
        (["Hi [voice:af_nobody] there."], "unknown voice 'af_nobody'"),
        (["Hi [rate:zoom] there."], "the rate tag [rate:zoom] has no rate"),
        ([BILLION_LAUGHS], "SSML: a document type declaration (<!DOCTYPE>) is refused"),
        (['<speak>\n<voice name="af_heart">Hi'], "SSML: <voice> opened on line 2 is not closed"),
        (["<p>not speak</p>", "--ssml"], "SSML: the document's root is <p>"),
        (["[voice:n]Hi.", "--voice-alias", "n"], "--voice-alias: 'n' is not NAME=VOICE"),
    ],
)
def test_bad_markup_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, argv, message):
    start = time.perf_counter()
    code = main(["say", *argv, "-o", str(tmp_path / "out.wav")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert time.perf_counter() - start < 5.0
    assert not (tmp_path / "out.wav").exists()


@pytest.mark.parametrize(
    "cast, message",
    [
        ("{not json", "is not JSON"),
        ('{"n": 3}', "the voice alias 'n' must be a voice name"),
        ('{"n": {"voice": "bm_george", "rate": 99}}', "the rate must be between 0.1 and 10, got 99"),
        ('["bm_george"]', "must be an object of name -> voice"),
    ],
)
def test_a_bad_cast_file_is_named(tmp_path, capsys, cast, message):
    path = tmp_path / "cast.json"
    path.write_text(cast, encoding="utf-8")
    code = main(["say", "[voice:n]Hi.", "--cast", str(path), "-o", str(tmp_path / "out.wav")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


@pytest.mark.model
def test_tags_a_cast_and_ssml_give_the_same_file(tmp_path, small_artifact):
    cast = tmp_path / "cast.json"
    cast.write_text(json.dumps({"narrator": {"voice": "bm_george", "rate": 1.5}}), encoding="utf-8")
    texts = {
        "tags": ["Hello there. [voice:bm_george][rate:1.5]How are you?"],
        "cast": ["Hello there. [voice:narrator]How are you?", "--cast", str(cast)],
        "alias": ["Hello there. [voice:n]How are you?", "--voice-alias", "n=bm_george"],
        "ssml": [
            '<speak>Hello there. <voice name="bm_george"><prosody rate="150%">How are you?</prosody></voice></speak>'
        ],
    }
    audio = {}
    for name, argv in texts.items():
        out = tmp_path / f"{name}.wav"
        code = main(["say", *argv, "-o", str(out), "--artifact", str(small_artifact), "--speed", "5"])
        assert code == 0
        audio[name], _ = sf.read(out, dtype="int16")
    np.testing.assert_array_equal(audio["tags"], audio["cast"])
    np.testing.assert_array_equal(audio["tags"], audio["ssml"])
    assert len(audio["alias"]) != len(audio["tags"])  # the alias has no rate: a slower second sentence
