"""The HTTP API's routes, as routers ``serve/app.py`` includes. Each route is a thin function: it takes what it
needs as FastAPI dependencies and answers with a response body from ``serve/responses.py``.

- :mod:`.openai`: ``POST /v1/audio/speech``, ``GET /v1/audio/voices``, ``GET /v1/models[/{model}]``;
- :mod:`.dev`: Kokoro-FastAPI's ``/dev/captioned_speech``, ``/dev/phonemize``, ``/dev/generate_from_phonemes``;
- :mod:`.ops`: ``GET /health``, ``GET /metrics``;
- :mod:`.service`: ``SpeechService``, a request's text or phonemes planned and put on the scheduler;
- :mod:`.audio`: an audio route's answer, streamed or whole;
- :mod:`.state`: the app's state (``app.state``) and the request's guard context as dependencies.

A new endpoint is a function in one of the routers plus its request body in ``serve/requests.py``.
"""
