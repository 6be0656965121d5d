"""Kokoro-FastAPI's voice tags, ``voice_aliases``, ``ssml`` and ``POST /dev/dialogue`` on the live server (the
small artifact): the request bodies of FastAPI's README answered 200 with the voices they name (labelled in the
timestamps), the same samples for the same switches written as tags, SSML or turns, marks with their times,
bad markup a 400 naming the field, and a server that turned tags off."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
from conftest import SPEED, speech
from plan_only import NoModel

from kokoro_tvm_ext.serve.plan import Limits, dialogue_text, plan_speech
from kokoro_tvm_ext.serve.requests import DialogueTurn
from kokoro_tvm_ext.serve.voices import VoiceBook
from kokoro_tvm_ext.speech import Speaker

pytestmark = pytest.mark.model


def pcm(server, path="/v1/audio/speech", **body) -> np.ndarray:
    body = {"response_format": "pcm", "stream": False, "speed": SPEED, **body}
    r = httpx.post(f"{server}{path}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, "<i2")


def captions(server, **body) -> dict:
    body = {"response_format": "pcm", "stream": False, "speed": SPEED, **body}
    r = httpx.post(f"{server}/dev/captioned_speech", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def voices_said(timestamps) -> list[tuple[str, str]]:
    return [(t["word"], t["voice"]) for t in timestamps if t["word"].isalpha()]


def test_fastapis_alias_request_through_the_openai_client(openai_client, server):
    """README, "Voice Aliases": the body as the official client sends it with extra_body."""
    response = openai_client.audio.speech.create(
        model="kokoro",
        voice="narrator",
        input="[voice:narrator] Once upon a time. [voice:villain] Never!",
        response_format="pcm",
        speed=SPEED,
        extra_body={
            "allow_voice_tags": True,
            "voice_aliases": {"narrator": "af_bella(2)+af_sky", "villain": "am_michael"},
        },
    )
    audio = np.frombuffer(response.content, "<i2")
    tagged = pcm(
        server, voice="af_heart", input="[voice:af_bella(2)+af_sky] Once upon a time. [voice:am_michael] Never!"
    )
    np.testing.assert_array_equal(audio, tagged)
    said = captions(
        server,
        voice="narrator",
        input="[voice:narrator] Once upon a time. [voice:villain] Never!",
        voice_aliases={"narrator": "af_bella(2)+af_sky", "villain": "am_michael"},
    )["timestamps"]
    assert voices_said(said) == [
        ("Once", "af_bella(2)+af_sky"),
        ("upon", "af_bella(2)+af_sky"),
        ("a", "af_bella(2)+af_sky"),
        ("time", "af_bella(2)+af_sky"),
        ("Never", "am_michael"),
    ]


def test_an_alias_with_a_rate_is_that_voice_at_that_pace(server):
    slow = pcm(
        server, input="Hi. [voice:grandpa]Hello there.", voice_aliases={"grandpa": {"voice": "am_michael", "rate": 0.8}}
    )
    tagged = pcm(server, input="Hi. [voice:am_michael][rate:0.8]Hello there.")
    plain = pcm(server, input="Hi. [voice:am_michael]Hello there.")
    np.testing.assert_array_equal(slow, tagged)
    assert len(slow) > len(plain)  # slower: more frames
    # The request's own voice an alias with a rate: that voice at that pace too.
    aliased = pcm(
        server, voice="grandpa", input="Hello there.", voice_aliases={"grandpa": {"voice": "am_michael", "rate": 0.8}}
    )
    np.testing.assert_array_equal(aliased, pcm(server, voice="am_michael", input="Hello there.", speed=SPEED * 0.8))


def test_fastapis_dialogue_body_is_the_same_turns_as_tags(server):
    """README, "Multi-Speaker / Dialogue": /dev/dialogue with turns and pause_between_turns."""
    body = {
        "turns": [
            {"voice": "af_bella", "text": "Did the multi speaker support land?"},
            {"voice": "am_michael", "text": "It did. Turns switch voices inline."},
        ],
        "pause_between_turns": 0.4,
    }
    turns = pcm(server, "/dev/dialogue", **body)
    tags = pcm(
        server,
        voice="af_bella",
        input="[voice:af_bella] Did the multi speaker support land? [pause:0.4s] [voice:am_michael] It did. "
        "Turns switch voices inline.",
        allow_voice_tags=True,
    )
    np.testing.assert_array_equal(turns, tags)
    assert len(turns) > 0.4 * 24000


def test_fastapis_ssml_body_is_the_same_samples_as_its_tags(server):
    """README, "SSML Input": ssml with allow_voice_tags (ssml alone is enough here)."""
    doc = (
        '<speak>Hi<break time="750ms"/>there. <voice name="am_michael"><prosody rate="slow">Slowly.</prosody></voice>'
        "</speak>"
    )
    with_both = pcm(server, voice="af_bella", input=doc, allow_voice_tags=True, ssml=True)
    alone = pcm(server, voice="af_bella", input=doc, ssml=True)
    tags = pcm(server, voice="af_bella", input="Hi[pause:750ms]there. [voice:am_michael][rate:0.75]Slowly.")
    np.testing.assert_array_equal(with_both, tags)
    np.testing.assert_array_equal(alone, tags)


def test_a_mark_is_in_the_timestamps_with_its_time(server):
    got = captions(server, input='<speak>Hello there. <mark name="second"/>Bye now.</speak>', ssml=True)["timestamps"]
    marks = [t for t in got if "mark" in t]
    assert [(m["mark"], m["word"]) for m in marks] == [("second", "")]
    after = got[got.index(marks[0]) + 1]
    before = got[got.index(marks[0]) - 1]
    assert before["end_time"] <= marks[0]["start_time"] <= after["start_time"]


@pytest.mark.parametrize(
    "body, param, message",
    [
        ({"input": "Hi [voice:af_nobody] there."}, "input", "af_nobody"),
        ({"input": "Hi.", "voice_aliases": {"x": "af_nobody"}}, "voice_aliases", "af_nobody"),
        ({"input": "Hi.", "voice_aliases": {"x": {"rate": 2}}}, "voice_aliases", 'has no "voice"'),
        ({"input": '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aa">]><speak>&a;</speak>'}, "input", "DOCTYPE"),
        ({"input": "<speak>" + "<s>" * 40, "ssml": True}, "input", "nested deeper than 32"),
    ],
)
def test_bad_markup_is_a_400_naming_the_field(server, body, param, message):
    start = time.perf_counter()
    r = speech(server, voice="af_heart", **body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and message in error["message"]
    assert time.perf_counter() - start < 5.0


def test_a_dialogue_without_turns_is_a_422(server):
    r = httpx.post(f"{server}/dev/dialogue", json={"turns": []}, timeout=30)
    assert r.status_code in (400, 422)


def test_a_server_without_tags_reads_them_as_text_and_refuses_dialogue():
    from fastapi.testclient import TestClient

    from kokoro_tvm_ext.serve.app import create_app

    speaker = Speaker(NoModel())
    off = Limits(voice_tags=False)
    plan = plan_speech(speaker, "Hi [voice:bm_george] there.", "af_heart", 1.0, None, voices=VoiceBook(), limits=off)
    assert [c.text for c in plan.chunks] == ["Hi [voice:bm_george] there."]  # read as written
    assert {c.voice for c in plan.chunks} == {"af_heart"}
    with TestClient(create_app(speaker, limits=off)) as client:
        r = client.post("/dev/dialogue", json={"turns": [{"voice": "af_heart", "text": "Hi."}]})
    assert r.status_code == 403 and "--no-voice-tags" in r.json()["error"]["message"]


def test_turns_of_one_voice_in_a_row_are_one():
    turns = [DialogueTurn(voice=v, text=t) for v, t in [("a", "1."), ("a", "2."), ("b", "3.")]]
    assert dialogue_text(turns, 0.25) == "[voice:a] 1. 2. [pause:250ms] [voice:b] 3."
    assert dialogue_text(turns, 0) == "[voice:a] 1. 2. [voice:b] 3."


def wyoming_pcm(address, text: str, size: int | None = None) -> np.ndarray:
    """``text`` sent to the server's Wyoming side whole (``size`` None) or in pieces of ``size`` characters."""
    import asyncio

    pytest.importorskip("wyoming")
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

    voice = SynthesizeVoice("af_heart")
    if size is None:
        events = [Synthesize(text, voice=voice).event()]
    else:
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        events = [SynthesizeStart(voice=voice).event(), *(SynthesizeChunk(p).event() for p in pieces)]
        events.append(SynthesizeStop().event())

    async def exchange():
        audio = []
        async with AsyncTcpClient(*address, read_timeout=120) as client:
            for event in events:
                await client.write_event(event)
            while (event := await client.read_event()) is not None and event.type != "audio-stop":
                assert event.type != "error", event.data
                if event.type == "audio-chunk":
                    audio.append(AudioChunk.from_event(event).audio)
        return np.frombuffer(b"".join(audio), "<i2")

    return asyncio.run(exchange())


def test_wyoming_reads_tags_and_ssml_as_the_http_server_does(server, server_wyoming):
    """Whole or in pieces (a voice tag's state carried from piece to piece, an SSML document held whole)."""
    tags = "Hello there. [voice:bm_george]How are you? [rate:1.5]Fine, thanks. Bye."
    doc = (
        '<speak>Hello there. <voice name="bm_george">How are you? <prosody rate="150%">Fine, thanks. Bye.</prosody>'
        "</voice></speak>"
    )
    want = pcm(server, voice="af_heart", input=tags, speed=1.0)
    np.testing.assert_array_equal(pcm(server, voice="af_heart", input=doc, speed=1.0), want)
    np.testing.assert_array_equal(wyoming_pcm(server_wyoming, tags), want)
    np.testing.assert_array_equal(wyoming_pcm(server_wyoming, tags, 5), want)
    np.testing.assert_array_equal(wyoming_pcm(server_wyoming, doc), want)
    np.testing.assert_array_equal(wyoming_pcm(server_wyoming, doc, 7), want)
