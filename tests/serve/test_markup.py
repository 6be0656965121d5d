"""Pronunciation markup and pause tags reach the server through the one pipeline: a pause tag is exact silence
at its place in the response, an override changes what /dev/phonemize returns for that word only, and a bad tag
or a bad lexicon file is refused with the tag or the line named, the server going on."""

from __future__ import annotations

import subprocess
import sys

import httpx
import numpy as np
from conftest import SAMPLE_RATE, speech


def pcm(server, text: str) -> np.ndarray:
    r = speech(server, input=text, response_format="pcm", stream=False)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


def test_a_pause_tag_is_exact_silence_between_the_sentences(server):
    plain = pcm(server, "Hi there. Go on.")
    paused = pcm(server, "Hi there. [pause:1s] Go on.")
    # One sentence a chunk either way, with the same seeds (a pause takes none): the paused answer is the plain
    # one with one second of zeros where the tag was.
    assert len(paused) == len(plain) + SAMPLE_RATE
    cut = next(i for i in range(len(plain)) if not paused[i : i + SAMPLE_RATE].any())
    np.testing.assert_array_equal(paused[:cut], plain[:cut])
    np.testing.assert_array_equal(paused[cut + SAMPLE_RATE :], plain[cut:])
    assert plain[:cut].any() and plain[cut:].any()


def test_an_override_changes_only_its_word(server):
    def phonemes(text):
        r = httpx.post(f"{server}/dev/phonemize", json={"text": text, "language": "a"}, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["phonemes"].split()

    plain, marked = phonemes("I like Kokoro a lot."), phonemes("I like [Kokoro](/kˈOkəɹO/) a lot.")
    assert [i for i, (a, b) in enumerate(zip(plain, marked)) if a != b] == [2] and len(plain) == len(marked)
    assert marked[2] == "kˈOkəɹO"


def test_a_bad_pause_tag_is_400_naming_it_and_the_server_goes_on(server):
    r = speech(server, input="Hi [pause:abc] there.")
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "[pause:abc]" in error["message"] and error["param"] == "input"
    assert speech(server, input="Hi there.").status_code == 200


def test_serve_refuses_a_bad_lexicon_line_before_loading_anything(tmp_path):
    bad = tmp_path / "words.tsv"
    bad.write_text("a\tKokoro\n", encoding="utf-8")  # no phonemes
    result = subprocess.run(
        [sys.executable, "-m", "kokoro_tvm_ext.cli", "serve", "--lexicon", str(bad), "--artifact", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]  # one line
    assert f"{bad}:1" in result.stderr and "Traceback" not in result.stderr
