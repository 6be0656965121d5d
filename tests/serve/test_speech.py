"""/v1/audio/speech over a real socket: every format decodes to the right audio, streams equal one-shot
responses, the official openai client works, and the listing endpoints answer."""

from __future__ import annotations

import io

import httpx
import numpy as np
import pytest
from conftest import SAMPLE_RATE, SPEED, speech

av = pytest.importorskip("av")
TEXT = "Hi, you. Go on!"

# Lossy codecs pad the start and end to whole frames: at most this many extra samples.
PADDING = {"mp3": 2 * 1152 + 1105, "aac": 3 * 1024, "opus": 2 * 960, "flac": 0, "wav": 0}


def decode(data: bytes) -> tuple[np.ndarray, int]:
    with av.open(io.BytesIO(data)) as container:
        frames = [f for f in container.decode(audio=0)]
    rate = frames[0].sample_rate
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]), rate


def pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, "<i2")


@pytest.fixture(scope="module")
def reference_pcm(server, voice):
    r = speech(server, input=TEXT, voice=voice, response_format="pcm", stream=False)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/pcm"
    return pcm(r.content)


def test_pcm_is_the_chunks_audio_back_to_back(reference_pcm, runtime, voice):
    from kokoro_tvm_ext.speech import chunk_text, load_config, load_voice, style_for, tokenize

    vocab = load_config()["vocab"]
    pack = load_voice(voice)
    parts = []
    phonemes = chunk_text(TEXT, vocab)  # the chunks of every front end: a sentence each, "Hi, you.", "Go on!"
    assert len(phonemes) == 2 and phonemes[0].endswith(".")
    fade = np.cos(np.linspace(0, np.pi / 2, 720)) ** 2  # the random weights' audio ends loud: 30 ms fade-out
    for i, chunk in enumerate(phonemes):
        tokens = np.array(tokenize(chunk, vocab), np.int64)
        audio, _ = runtime.synthesize(tokens, style_for(pack, len(tokens)), speed=SPEED, noise_seed=i)
        audio[-720:] *= fade
        parts.append(audio)
    want = np.round(np.clip(np.concatenate(parts), -1, 1) * 32767).astype(np.int16)
    np.testing.assert_array_equal(reference_pcm, want)


def test_streamed_pcm_equals_the_one_shot_response_sample_for_sample(server, voice, reference_pcm):
    with httpx.stream(
        "POST",
        f"{server}/v1/audio/speech",
        timeout=120,
        json={"input": TEXT, "voice": voice, "response_format": "pcm", "speed": SPEED},
    ) as r:
        assert r.status_code == 200
        pieces = [p for p in r.iter_raw() if p]
    assert len(pieces) >= 2, "the response came in one piece: not streamed"
    np.testing.assert_array_equal(pcm(b"".join(pieces)), reference_pcm)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav"])
def test_every_format_decodes_to_24khz_audio_of_the_right_length(server, voice, reference_pcm, fmt, stream):
    r = speech(server, input=TEXT, voice=voice, response_format=fmt, stream=stream)
    assert r.status_code == 200, r.text
    audio, rate = decode(r.content)
    if fmt == "opus":
        # libopus always decodes at 48 kHz; the stream's header records the 24 kHz input rate.
        head = r.content.index(b"OpusHead")
        assert int.from_bytes(r.content[head + 12 : head + 16], "little") == SAMPLE_RATE
        assert rate == 48000
        audio = audio[::2]
    else:
        assert rate == SAMPLE_RATE
    n = len(reference_pcm)
    assert n <= len(audio) <= n + PADDING[fmt], f"{fmt}: {len(audio)} samples, want {n}"
    if fmt in ("wav", "flac"):  # lossless: the very same samples
        np.testing.assert_array_equal(
            np.round(audio * 32768).astype(np.int16) if audio.dtype != np.int16 else audio, reference_pcm
        )


def test_openai_client_streams_speech(openai_client, voice, reference_pcm):
    with openai_client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=voice, input=TEXT, response_format="pcm", speed=SPEED
    ) as response:
        data = b"".join(response.iter_bytes())
    np.testing.assert_array_equal(pcm(data), reference_pcm)


def test_blends_in_both_syntaxes_are_the_same_voice(server):
    from kokoro_tvm_ext.speech import list_voices

    names = [v.name for v in list_voices()][:2]
    if len(names) < 2:
        pytest.skip("needs two voices")
    a, b = names
    ours = speech(server, input="Blend.", voice=f"{a}:0.75,{b}:0.25", response_format="pcm", stream=False)
    theirs = speech(server, input="Blend.", voice=f"{a}(3)+{b}(1)", response_format="pcm", stream=False)
    solo = speech(server, input="Blend.", voice=a, response_format="pcm", stream=False)
    assert ours.status_code == theirs.status_code == solo.status_code == 200
    assert ours.content == theirs.content
    assert ours.content != solo.content


def test_voices_models_health(server, voice):
    voices = httpx.get(f"{server}/v1/audio/voices").json()["voices"]
    assert voice in [v["id"] for v in voices]
    assert all(set(v) == {"id", "name", "language", "gender"} for v in voices)
    models = [m["id"] for m in httpx.get(f"{server}/v1/models").json()["data"]]
    assert {"kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(models)
    assert httpx.get(f"{server}/v1/models/tts-1").json()["id"] == "tts-1"
    health = httpx.get(f"{server}/health")
    assert health.status_code == 200 and health.json()["status"] == "healthy"


def test_a_requests_input_warnings_stay_out_of_the_servers_log(server, server_log):
    # Japanese text for an English voice, a symbol Kokoro has no token for, SSML's ignored pitch: each is spoken,
    # and each warns in `say`; a server leaves them to its client rather than a log line per request.
    requests = [
        {"input": "こんにちは", "voice": "af_heart"},
        {"input": "Weather: ☃ and ☂ today.", "voice": "af_heart"},
        {"input": '<speak><prosody pitch="+2st">Higher.</prosody></speak>', "voice": "af_heart"},
    ]
    for body in requests:
        r = speech(server, response_format="pcm", **body)
        assert r.status_code == 200, r.text
    log = server_log.read_text()
    assert "arning" not in log, log[-3000:]
