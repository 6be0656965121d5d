"""OpenAI's and Kokoro-FastAPI's extras on the live server (the small artifact): server-sent events read with the
official openai client, OpenAI's voice names, volume_multiplier, /dev/phonemize and /dev/generate_from_phonemes;
each bad new field a 4xx naming it, and the server keeps serving."""

from __future__ import annotations

import base64
import io
import json
import wave

import httpx
import numpy as np
import pytest
from conftest import SAMPLES_PER_FRAME, SPEED, speech

from kokoro_tvm_ext.serve.openai_voices import OPENAI_VOICES

TEXT = "Hi there."  # one clause under the first chunk's cut: one chunk, whether spoken from text or phonemes


def pcm_of(server, **body) -> np.ndarray:
    r = speech(server, **{"input": TEXT, "response_format": "pcm", "stream": False, **body})
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


@pytest.fixture(scope="module")
def reference(server):
    """TEXT in OpenAI's alloy's Kokoro voice, as pcm."""
    from kokoro_tvm_ext.speech import list_voices

    if OPENAI_VOICES["alloy"] not in {v.name for v in list_voices()}:
        pytest.skip(f"needs the voice {OPENAI_VOICES['alloy']}")
    return pcm_of(server, voice=OPENAI_VOICES["alloy"])


def test_sse_stream_through_the_openai_client_is_the_same_audio(openai_client, server, reference):
    long_text = f"{TEXT} Go on."
    whole = pcm_of(server, input=long_text, voice="alloy")
    events = []
    with openai_client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=long_text, response_format="pcm", speed=SPEED, stream_format="sse"
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line:
                assert line.startswith("data: "), line
                events.append(json.loads(line.removeprefix("data: ")))
    *deltas, done = events
    assert len(deltas) == 2 and all(e["type"] == "speech.audio.delta" for e in deltas)  # one per sentence
    audio = np.frombuffer(b"".join(base64.b64decode(e["audio"]) for e in deltas), "<i2")
    np.testing.assert_array_equal(audio, whole)
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["output_tokens"] * SAMPLES_PER_FRAME == len(whole)  # the model's frames: 600 samples each
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] and usage["input_tokens"] > 10


def test_openai_voice_names_are_their_kokoro_voices(server, reference):
    np.testing.assert_array_equal(pcm_of(server, voice="alloy"), reference)
    np.testing.assert_array_equal(pcm_of(server, voice={"id": "alloy"}), reference)  # OpenAI's voice object
    listed = httpx.get(f"{server}/v1/audio/voices").json()["aliases"]
    assert {a["id"]: a["voice"] for a in listed} == OPENAI_VOICES


def test_aliases_in_a_blend_share_its_weights():
    from kokoro_tvm_ext.serve.voices import VoiceBook

    book = VoiceBook({"alloy": "af_alloy", "duo": "af_nova(1)+am_adam(3)"})
    assert book.resolve("alloy") == "af_alloy"
    assert book.resolve("duo") == "af_nova(1)+am_adam(3)"  # alone: the spec as written
    assert book.resolve("af_heart") == "af_heart"
    assert book.resolve("alloy:0.5,duo:0.5") == "af_alloy:0.5,af_nova:0.125,am_adam:0.375"
    assert book.resolve("duo(1)+am_adam(1)") == "af_nova:0.125,am_adam:0.875"


def test_an_alias_of_a_voice_not_installed_is_named_with_the_alias():
    from kokoro_tvm_ext.errors import InvalidInputError, UnknownVoiceError
    from kokoro_tvm_ext.serve.voices import VoiceBook

    book = VoiceBook({"robot": "zz_nobody"})
    with pytest.raises(UnknownVoiceError, match="'robot' is an alias of 'zz_nobody'"):
        book.choose("robot")
    with pytest.raises(InvalidInputError, match="--voice-alias robot=zz_nobody"):
        book.check_aliases({"robot": "zz_nobody"})


def test_volume_multiplier_halves_the_samples(server, reference):
    r = speech(server, input=TEXT, voice="alloy", response_format="wav", stream=False, volume_multiplier=0.5)
    assert r.status_code == 200, r.text
    with wave.open(io.BytesIO(r.content)) as w:
        half = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    assert len(half) == len(reference)
    # Each side is rounded to int16 from the same float: x * 0.5 is within one step of round(x) / 2.
    unclipped = np.abs(reference.astype(np.int32)) < 32767
    assert unclipped.mean() > 0.99
    diff = np.abs(half[unclipped].astype(np.float64) - reference[unclipped] / 2)
    assert diff.max() <= 1.0 and np.abs(reference).max() > 1000


def test_phonemize_is_the_g2p_and_its_tokens(server):
    from kokoro_tvm_ext.speech import load_config, phonemize, tokenize

    vocab = load_config()["vocab"]
    for text, language in (("Hello there. How are you today?\n\nFine!", "a"), ("Bonjour à tous.", "fr")):
        r = httpx.post(f"{server}/dev/phonemize", json={"text": text, "language": language})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["phonemes"] == phonemize(text, language)
        assert body["tokens"] == tokenize(body["phonemes"], vocab)


def test_generate_from_phonemes_equals_the_text(server, reference):
    phonemes = httpx.post(f"{server}/dev/phonemize", json={"text": TEXT}).json()["phonemes"]
    r = httpx.post(
        f"{server}/dev/generate_from_phonemes",
        json={"phonemes": phonemes, "voice": "alloy", "speed": SPEED, "response_format": "pcm"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    np.testing.assert_array_equal(np.frombuffer(r.content, "<i2"), reference)
    wav = httpx.post(  # one phoneme: a short synthesis
        f"{server}/dev/generate_from_phonemes", json={"phonemes": "ə", "voice": "alloy", "speed": SPEED}, timeout=120
    )
    assert wav.headers["content-type"] == "audio/wav" and wav.content[:4] == b"RIFF"  # Kokoro-FastAPI's default


@pytest.mark.parametrize("flag", ["alloy", "=af_heart", "alloy=", "my voice=af_heart"])
def test_a_malformed_alias_flag_is_one_line_naming_it(flag):
    from kokoro_tvm_ext.errors import InvalidInputError
    from kokoro_tvm_ext.serve.openai_voices import configured_aliases

    with pytest.raises(InvalidInputError, match="--voice-alias") as info:
        configured_aliases([flag])
    assert "\n" not in str(info.value)


def test_alias_file_and_flags_override_the_defaults(tmp_path):
    from kokoro_tvm_ext.serve.openai_voices import configured_aliases

    path = tmp_path / "aliases.txt"
    path.write_text("# ours\nalloy = af_heart\nnarrator=bm_george:0.7,bf_emma:0.3  # a blend\n")
    aliases, given = configured_aliases(["narrator=bm_lewis"], [str(path)])
    assert given == {"alloy": "af_heart", "narrator": "bm_lewis"}
    assert aliases == {**OPENAI_VOICES, "alloy": "af_heart", "narrator": "bm_lewis"}


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


@pytest.mark.parametrize(
    "route, body, status, param, words",
    [
        ("/v1/audio/speech", {"input": "Hi.", "stream_format": "websocket"}, 400, "stream_format", "'sse'"),
        ("/v1/audio/speech", {"input": "Hi.", "volume_multiplier": 0}, 400, "volume_multiplier", "greater than 0"),
        ("/v1/audio/speech", {"input": "Hi.", "volume_multiplier": 11}, 400, "volume_multiplier", "10"),
        ("/v1/audio/speech", {"input": "Hi.", "voice": "allloy"}, 400, "voice", "alloy"),
        ("/dev/captioned_speech", {"input": "Hi.", "stream_format": "sse"}, 400, "stream_format", "JSON lines"),
        ("/dev/phonemize", {"text": "Hi.", "language": "q"}, 400, "language", "unknown language"),
        ("/dev/phonemize", {"text": " "}, 400, "text", "empty"),
        ("/dev/phonemize", {"text": "word " * 500}, 413, "text", "--max-input-chars"),
        ("/dev/generate_from_phonemes", {"phonemes": "hˈI", "voice": "nobody"}, 400, "voice", "nobody"),
        ("/dev/generate_from_phonemes", {"phonemes": "", "voice": "alloy"}, 400, "phonemes", "empty"),
        ("/dev/generate_from_phonemes", {"phonemes": "ə" * 2001, "voice": "alloy"}, 413, "phonemes", "2001"),
        ("/dev/generate_from_phonemes", {"phonemes": "123", "voice": "alloy"}, 400, "phonemes", "no known phonemes"),
    ],
)
def test_bad_new_fields_are_4xx_naming_the_field(server, route, body, status, param, words):
    err = error_of(httpx.post(f"{server}{route}", json=body, timeout=60), status)
    assert err["param"] == param and words in err["message"], err
    assert httpx.get(f"{server}/health").status_code == 200
