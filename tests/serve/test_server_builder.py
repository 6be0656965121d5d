"""One server builder (``serve/server.py``) for `kokoro-tvm serve` and the Ray Serve deployment: every flag of
`serve` is an option of the builder (or the listener's, said where), the deployment takes each one by the same
name, and each reaches the server it builds, down to the app a replica answers with (no Ray: its ``serve``
module is a stand-in that keeps what the deployment hands it)."""

from __future__ import annotations

from dataclasses import fields
from inspect import isfunction, signature
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakes import FakeSpeaker

from kokoro_tvm_ext.cli import build_parser
from kokoro_tvm_ext.cli import serve as serve_command
from kokoro_tvm_ext.serve import ray_deployment, server
from kokoro_tvm_ext.serve.auth import KEYS_ENV
from kokoro_tvm_ext.serve.options import BOUNDS, GuardConfig
from kokoro_tvm_ext.speech import Speaker, SpeakerConfig

pytestmark = pytest.mark.unit

MODEL = {f.name for f in fields(SpeakerConfig)} - {"target"}  # --artifact, --weights, ... (`serve` has no --target)
LISTENER = {"port", "log_level", "wyoming", "wyoming_idle_timeout"}  # the listening process's, not the app's


def serve_parser():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices["serve"]


def flags() -> dict[str, object]:
    """`kokoro-tvm serve`'s options: dest -> default."""
    return {a.dest: a.default for a in serve_parser()._actions if a.dest != "help"}


def test_every_flag_of_serve_is_an_option_of_the_server_builder():
    assert set(flags()) == set(server.OPTIONS) | MODEL | LISTENER


def test_the_flags_default_to_the_builders_defaults():
    builder = {name: p.default for name, p in signature(server.server).parameters.items()}
    builder |= {name: getattr(GuardConfig, name) for name in BOUNDS}
    given = flags()
    for name in server.OPTIONS:
        assert (() if given[name] is None else given[name]) == (() if builder[name] is None else builder[name]), name


def test_the_deployment_takes_every_flag_of_serve_or_says_where_it_goes():
    taken = (set(signature(ray_deployment.build_app).parameters) | set(server.OPTIONS)) - set(ray_deployment.NOT_HERE)
    for name in flags():
        assert (name in taken) != (name in ray_deployment.NOT_HERE), name
        assert name in ray_deployment.KEYS, name  # app_builder takes it (and refuses one of NOT_HERE with why)
    assert set(ray_deployment.NOT_HERE) <= set(flags())  # no reason kept for a flag that is gone


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.delenv(KEYS_ENV, raising=False)
    (tmp_path / "artifact").mkdir()
    (tmp_path / "keys.txt").write_text("key-from-file\n")
    (tmp_path / "aliases.txt").write_text("reader=bf_emma\n")
    (tmp_path / "words.tsv").write_text("a\tkokoro\tkˈOkəɹO\n")
    (tmp_path / "voices").mkdir()
    return tmp_path


def every_option(tmp: Path) -> dict[str, tuple[str, object]]:
    """Each option of the builder, and the model's: (as app_builder's text, as the CLI's flag value), none of
    them the default."""
    return {
        "host": ("0.0.0.0", "0.0.0.0"),
        "allowed_hosts": ("tts.lan", "tts.lan"),
        "api_key": ("key-1", ["key-1"]),
        "api_key_file": (str(tmp / "keys.txt"), [str(tmp / "keys.txt")]),
        "voice_alias": ("narrator=bm_george", ["narrator=bm_george"]),
        "voice_aliases": (str(tmp / "aliases.txt"), [str(tmp / "aliases.txt")]),
        "max_input_chars": ("40", 40),
        "max_batch": ("3", 3),
        "first_chunk_tokens": ("7", 7),
        "docs": ("true", True),
        "no_voice_tags": ("true", True),
        "voices_dir": (str(tmp / "voices"), [str(tmp / "voices")]),
        "max_body_bytes": ("5000", 5000),
        "max_requests": ("9", 9),
        "max_client_requests": ("2", 2),
        "request_timeout": ("12.5", 12.5),
        "body_timeout": ("3.5", 3.5),
        "artifact": (str(tmp / "artifact"), str(tmp / "artifact")),
        "lexicon": (str(tmp / "words.tsv"), str(tmp / "words.tsv")),
        "threads": ("2", 2),
    }


class StandInServe:
    """Ray Serve's ``serve`` module as the deployment uses it: keeps the settings and what each replica runs."""

    def __init__(self):
        self.settings = self.builder = None

    def deployment(self, name, **settings):
        self.settings = settings
        return lambda cls: SimpleNamespace(bind=lambda: cls)

    def ingress(self, builder):
        # As Ray: only a plain function is a builder it calls once per replica; anything else (a bound method
        # too) it takes for the ASGI app itself and calls per request.
        assert isfunction(builder), f"Ray Serve would take {builder!r} for an ASGI app"
        self.builder = builder
        return lambda cls: cls


@pytest.fixture
def deploy(monkeypatch):
    stand_in = StandInServe()
    monkeypatch.setattr(ray_deployment, "_serve", lambda: stand_in)

    def run(args: dict):
        ray_deployment.app_builder(args)
        return stand_in

    return run


def described(built: server.Server) -> dict:
    """What a Server holds, its voice book by its aliases (a book is not compared by value)."""
    return {f.name: getattr(built, f.name) for f in fields(built) if f.name != "voices"} | {
        "aliases": built.voices.aliases
    }


def landed(built: server.Server, option: str):
    """Where ``option`` ends up in ``built``."""
    where = {
        "allowed_hosts": built.guard.allowed_hosts,
        "api_key": built.guard.api_keys,
        "api_key_file": built.guard.api_keys,
    }
    where |= {"voice_alias": built.voices.aliases, "voice_aliases": built.voices.aliases}
    where |= {"no_voice_tags": not built.voice_tags, "voices_dir": built.voices_dirs}
    if option in where:
        return where[option]
    return getattr(built.guard if option in BOUNDS else built, option)


def test_every_option_reaches_the_server_of_serve_and_of_the_deployment_alike(files, deploy, monkeypatch):
    values = every_option(files)
    assert set(values) == (set(server.OPTIONS) - set(ray_deployment.NOT_HERE)) | {"artifact", "lexicon", "threads"}
    argv = ["serve", "--docs", "--no-voice-tags"]  # the switches (True: the flag alone)
    for name, (_, value) in values.items():
        for one in value if isinstance(value, list) else [] if value is True else [value]:
            argv += [f"--{name.replace('_', '-')}", str(one)]
    from_cli = serve_command._server(build_parser().parse_args(argv))
    monkeypatch.setattr(server.Server, "app", lambda self, speaker=None: self)  # what a replica would build from
    deployed = deploy({name: text for name, (text, _) in values.items()}).builder()
    assert described(deployed) == described(from_cli)
    default = server.server(SpeakerConfig(artifact=files / "artifact"))
    for name in set(server.OPTIONS) - set(ray_deployment.NOT_HERE):
        assert landed(deployed, name) != landed(default, name), f"{name} did not reach the deployment's server"
    assert deployed.guard.api_keys == ("key-1", "key-from-file")
    assert {"narrator": "bm_george", "reader": "bf_emma"}.items() <= deployed.voices.aliases.items()
    assert deployed.speaker.lexicon is not None and deployed.speaker.threads == 2


class RecordingSpeaker(FakeSpeaker):
    """The stand-in model, keeping what each plan was asked."""

    def __init__(self):
        super().__init__(chunk_seconds=0.1)
        self.plans, self.warmed = [], False

    def warm_up(self):
        self.warmed = True

    def plan(self, text, voice, *, cancel, **options):
        self.plans.append(options)
        return super().plan(text, voice, cancel=cancel, **options)


def test_a_replica_plans_with_the_deployments_first_chunk_tokens_and_input_limit(files, deploy, monkeypatch):
    from fastapi.testclient import TestClient

    speaker = RecordingSpeaker()
    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **_: speaker))
    deployed = deploy({"artifact": str(files / "artifact"), "first_chunk_tokens": "7", "max_input_chars": "40"})
    with TestClient(deployed.builder(), base_url="http://localhost") as client:  # what a replica runs first
        reply = client.post("/v1/audio/speech", json={"input": "Hello there", "voice": "af_heart", "stream": False})
        assert reply.status_code == 200, reply.text
        too_long = client.post("/v1/audio/speech", json={"input": "x" * 41, "voice": "af_heart"})
    assert speaker.warmed and speaker.plans[0]["first_chunk_tokens"] == 7
    assert too_long.status_code == 413 and "at most 40" in too_long.text


def test_wyoming_beside_the_app_shares_its_model_scheduler_and_limits(files, monkeypatch):
    pytest.importorskip("wyoming")
    speaker = RecordingSpeaker()
    speaker.voice = lambda spec, lang=None: SimpleNamespace(spec=spec, lang="a")  # Wyoming reads its language
    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **_: speaker))
    built = server.server(
        SpeakerConfig(artifact=files / "artifact"), max_input_chars=40, first_chunk_tokens=7, request_timeout=9.0
    )
    app = built.app()
    try:
        service = built.wyoming_beside(app, idle_timeout=5.0)
        assert (service.speaker, service.scheduler) == (speaker, app.state.scheduler)
        config = service.config
        assert (config.max_input_chars, config.first_chunk_tokens, config.synthesis_timeout) == (40, 7, 9.0)
        assert config.idle_timeout == 5.0
    finally:
        app.state.scheduler.stop()


def test_serve_listens_with_the_built_app_and_its_wyoming_beside(files, monkeypatch, capsys):
    """`kokoro-tvm serve` end to end but the model and the listening: the app it serves and the Wyoming service
    beside it take the flags."""
    pytest.importorskip("wyoming")
    from kokoro_tvm_ext.cli import main
    from kokoro_tvm_ext.serve import listen, wyoming

    speaker = RecordingSpeaker()
    speaker.voice = lambda spec, lang=None: SimpleNamespace(spec=spec, lang="a")
    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **_: speaker))
    served, beside = {}, {}
    monkeypatch.setattr(listen, "run", lambda app, **kw: served.update(app=app, **kw))
    stopped = []
    thread = SimpleNamespace(stop=lambda: stopped.append(True))
    monkeypatch.setattr(wyoming, "start_in_thread", lambda service, sock: beside.update(service=service) or thread)
    argv = ["serve", "--artifact", str(files / "artifact"), "--port", "0", "--first-chunk-tokens", "7"]
    argv += ["--max-batch", "2", "--request-timeout", "9", "--wyoming", "tcp://127.0.0.1:0"]
    assert main(argv) == 0, capsys.readouterr().err
    app = served["app"]
    assert app.state.limits.first_chunk_tokens == 7 and app.state.scheduler.max_batch == 2
    assert served["bounds"].request_timeout == 9.0 and speaker.warmed
    service = beside["service"]
    assert service.scheduler is app.state.scheduler and service.config.first_chunk_tokens == 7
    assert service.config.synthesis_timeout == 9.0 and stopped == [True]
    app.state.scheduler.stop()
