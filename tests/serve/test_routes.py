"""The app's routes as the docs list them (docs/server.md, "Routes"): each served once, under the operation id
and request body it always had, the speech routes counted by the in-flight limits, and every route answering
from its own app's state (two apps in one process share nothing)."""

from __future__ import annotations

import pytest
from fakes import FakeSpeaker, FakeVoices
from fastapi.testclient import TestClient

from kokoro_tvm_ext.serve.app import SPEECH_PATHS, create_app

pytestmark = pytest.mark.unit

# (method, path): (operation id, request body model): as published before the routes moved to routers; a client
# generated from the schema calls these ids.
ROUTES = {
    ("post", "/v1/audio/speech"): ("speech_v1_audio_speech_post", "SpeechRequest"),
    ("post", "/dev/captioned_speech"): ("captioned_speech_dev_captioned_speech_post", "CaptionedSpeechRequest"),
    ("post", "/dev/dialogue"): ("dialogue_dev_dialogue_post", "DialogueRequest"),
    ("post", "/dev/phonemize"): ("phonemize_text_dev_phonemize_post", "PhonemizeRequest"),
    ("post", "/dev/generate_from_phonemes"): (
        "generate_from_phonemes_dev_generate_from_phonemes_post",
        "PhonemeSpeechRequest",
    ),
    ("get", "/v1/audio/voices"): ("list_voices_v1_audio_voices_get", None),
    ("get", "/v1/models"): ("list_models_v1_models_get", None),
    ("get", "/v1/models/{model}"): ("get_model_v1_models__model__get", None),
    ("get", "/health"): ("health_health_get", None),
    ("get", "/metrics"): ("prometheus_metrics_metrics_get", None),
}


@pytest.fixture(scope="module")
def schema():
    return create_app(FakeSpeaker(), voices=FakeVoices()).openapi()


def test_every_documented_route_is_served_under_its_operation_id_and_request_body(schema):
    served = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            served[(method, path)] = (operation["operationId"], body and body["$ref"].rsplit("/", 1)[-1])
    assert served == ROUTES


def test_no_dependency_shows_in_the_schema(schema):
    """The routes take the speaker, scheduler, voices, limits and metrics as dependencies on the request alone:
    the only parameter a client sees is the model id in ``/v1/models/{model}``."""
    parameters = {
        (method, path): [p["name"] for p in operation.get("parameters", [])]
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    }
    assert parameters.pop(("get", "/v1/models/{model}")) == ["model"]
    assert all(names == [] for names in parameters.values()), parameters


def test_the_in_flight_limits_count_the_speech_routes_only():
    assert SPEECH_PATHS == {
        "/v1/audio/speech",
        "/dev/captioned_speech",
        "/dev/dialogue",
        "/dev/phonemize",
        "/dev/generate_from_phonemes",
    }


class OtherVoices(FakeVoices):
    aliases = {"nova": "af_nova", "onyx": "am_onyx"}


def test_two_apps_in_one_process_answer_from_their_own_state():
    with (
        TestClient(create_app(FakeSpeaker(), voices=FakeVoices())) as first,
        TestClient(create_app(FakeSpeaker(), voices=OtherVoices())) as second,
    ):
        assert first.get("/v1/audio/voices").json()["aliases"] == [{"id": "alloy", "voice": "af_alloy"}]
        assert second.get("/v1/audio/voices").json()["aliases"] == [
            {"id": "nova", "voice": "af_nova"},
            {"id": "onyx", "voice": "am_onyx"},
        ]
        said = first.post("/v1/audio/speech", json={"input": "one two", "response_format": "pcm", "stream": False})
        assert said.status_code == 200, said.text
        # Two chunks of one second of silence at 24 kHz, 16-bit: from the first app's speaker, not the second's.
        assert len(said.content) == 2 * 24000 * 2
        assert second.get("/health").json()["scheduler"]["chunks_done"] == 0
        assert first.get("/health").json()["scheduler"]["chunks_done"] == 2
