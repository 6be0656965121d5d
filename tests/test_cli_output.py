"""`kokoro-tvm say`'s output files without a model: an output that cannot be written, or in a format it cannot
write, fails before any synthesis (a real process, /proc, an artifact that does not exist), and the audio and the
subtitles appear together or not at all (a fake speaker whose synthesis removes one output's directory, as a full
disk or an unmounted drive would)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.speech import Speaker
from kokoro_tvm_ext.support.cache import AtomicFiles, check_writable_file

pytestmark = pytest.mark.integration
KOKORO_TVM = str(Path(sys.executable).parent / "kokoro-tvm")


@pytest.fixture
def voice_file(tmp_path):
    path = tmp_path / "voice.npy"
    np.save(path, np.zeros((510, 1, 256), np.float32))
    return path


@pytest.mark.parametrize("flag", ["-o", "--subtitles"])
def test_an_output_in_proc_fails_before_synthesis(tmp_path, flag):
    # An empty cache: had it gone on, the first step would be fetching weights and compiling (minutes).
    env = {**os.environ, "KOKORO_TVM_CACHE": str(tmp_path / "cache")}
    paths = {"-o": str(tmp_path / "out.wav"), "--subtitles": str(tmp_path / "out.srt")}
    paths[flag] = "/proc/x.srt" if flag == "--subtitles" else "/proc/x.wav"
    start = time.perf_counter()
    result = subprocess.run(
        [KOKORO_TVM, "say", "Hello.", "-o", paths["-o"], "--subtitles", paths["--subtitles"]],
        env=env,
        capture_output=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    err = result.stderr.decode().strip()
    assert result.returncode == 1, err
    assert err == f"kokoro-tvm say: cannot write {paths[flag]}: directory /proc does not accept new files " + (
        "(No such file or directory)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no WAV, no subtitles, not even the cache
    assert seconds < 30, f"{seconds:.1f} s: did it synthesize first?"


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["-o", "{tmp}/out.xyz"],
            "cannot write '.xyz' files ({tmp}/out.xyz): give a name ending in .wav, .flac, .mp3, .opus, .ogg, .aac, "
            ".m4a, .m4b, .pcm, or --format wav|flac|mp3|opus|aac|m4a|pcm",
        ),
        (
            ["-o", "{tmp}/out"],
            "cannot write a name without a suffix ({tmp}/out): give a name ending in .wav, .flac, .mp3, .opus, .ogg, "
            ".aac, .m4a, .m4b, .pcm, or --format wav|flac|mp3|opus|aac|m4a|pcm",
        ),
        (["-o", "-", "--format", "ogg"], "unknown --format 'ogg'; choose one of wav, flac, mp3, opus, aac, m4a, pcm"),
    ],
)
def test_a_format_say_cannot_write_is_refused_before_the_model_loads(tmp_path, args, message):
    # The artifact is a directory that does not exist: had say gone on to load it, it would fail with exit 3.
    env = {**os.environ, "KOKORO_TVM_CACHE": str(tmp_path / "cache")}
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    start = time.perf_counter()
    result = subprocess.run(
        [KOKORO_TVM, "say", "Hello.", *argv, "--artifact", str(tmp_path / "nowhere")],
        env=env,
        capture_output=True,
        timeout=120,
    )
    seconds = time.perf_counter() - start
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode() == f"kokoro-tvm say: {message.replace('{tmp}', str(tmp_path))}\n"
    assert result.stdout == b"" and list(tmp_path.iterdir()) == []  # no audio, not even the cache
    assert seconds < 30, f"{seconds:.1f} s: did it synthesize first?"


def test_without_pyav_say_names_the_install_before_the_model_loads(tmp_path, voice_file, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "av", None)  # `import av` raises ImportError
    out = tmp_path / "out.mp3"
    # An artifact that does not exist: had say gone on to load it, that would be the error.
    argv = ["say", "Hello.", "-o", str(out), "--voice", str(voice_file), "--lang", "a"]
    code = main([*argv, "--artifact", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 3
    assert err == "kokoro-tvm say: writing mp3 audio needs PyAV (FFmpeg's codecs): pip install av\n"
    assert not out.exists()


def test_a_device_is_not_replaced_by_a_file():
    with pytest.raises(OSError, match="not a regular file"):
        check_writable_file("/dev/null")


class VanishingSpeaker:
    """Speaks one second of a tone, and meanwhile the directory ``gone`` is removed."""

    sample_rate = 24000

    def __init__(self, gone: Path):
        self.gone = gone

    def plan(self, text, voice, **options):
        return SimpleNamespace(chunks=[text])

    def run(self, plan):
        from kokoro_tvm_ext.speech import SpeechChunk
        from kokoro_tvm_ext.speech.timestamps import WordTiming

        self.gone.rmdir()
        audio = 0.1 * np.sin(np.arange(24000) / 10).astype(np.float32)
        yield SpeechChunk(0, audio, np.zeros(0, np.int64), [WordTiming("Hello", 0.1, 0.6, False)], 0.0, plan.chunks[0])


@pytest.mark.parametrize("failing", ["subtitles", "wav"])
def test_when_one_output_cannot_be_written_neither_is_left(tmp_path, voice_file, monkeypatch, capsys, failing):
    wav_dir, srt_dir = tmp_path / "wav", tmp_path / "srt"
    wav_dir.mkdir()
    srt_dir.mkdir()
    (wav_dir / "out.wav").write_bytes(b"the previous WAV")  # replaced only if both are written
    gone = srt_dir if failing == "subtitles" else wav_dir / "sub"
    gone.mkdir(exist_ok=True)
    wav = wav_dir / "out.wav" if failing == "subtitles" else gone / "out.wav"
    srt = gone / "out.srt" if failing == "subtitles" else srt_dir / "out.srt"
    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **kw: VanishingSpeaker(gone)))
    code = main(["say", "Hello.", "-o", str(wav), "--subtitles", str(srt), "--voice", str(voice_file), "--lang", "a"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and err.startswith("kokoro-tvm say: cannot write "), err
    assert (wav_dir / "out.wav").read_bytes() == b"the previous WAV"
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["voice.npy", "wav/out.wav"], left


def test_both_outputs_are_written_together(tmp_path, voice_file, monkeypatch, capsys):
    import soundfile as sf

    gone = tmp_path / "scratch"
    gone.mkdir()
    monkeypatch.setattr(Speaker, "open", classmethod(lambda cls, config, **kw: VanishingSpeaker(gone)))
    wav, srt = tmp_path / "out.wav", tmp_path / "out.srt"
    assert (
        main(["say", "Hello.", "-o", str(wav), "--subtitles", str(srt), "--voice", str(voice_file), "--lang", "a"]) == 0
    )
    audio, rate = sf.read(wav, dtype="float32")
    assert rate == 24000 and len(audio) == 24000
    assert srt.read_text() == "1\n00:00:00,100 --> 00:00:00,600\nHello\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.srt", "out.wav", "voice.npy"]


def test_atomic_files_rename_all_or_none(tmp_path):
    (tmp_path / "a").write_text("old a")
    with AtomicFiles() as files:
        with files.open(tmp_path / "a") as f:
            f.write(b"new a")
        with files.open(tmp_path / "b") as f:
            f.write(b"new b")
        assert (tmp_path / "a").read_text() == "old a"  # nothing moves before the end
    assert [(tmp_path / n).read_text() for n in "ab"] == ["new a", "new b"]

    # A rename that fails (its target became a directory) takes back the ones done before it.
    with pytest.raises(OSError):
        with AtomicFiles() as files:
            for name in ("c", "d"):
                with files.open(tmp_path / name) as f:
                    f.write(b"x")
            (tmp_path / "d").mkdir()
            (tmp_path / "d" / "keep").write_text("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "d"]


def test_a_command_imports_only_its_own_module():
    """`say` imports neither the other commands' modules nor the server's, the book's or Wyoming's libraries
    (tens of ms each of a cold start); every command's arguments are still there when the whole parser is built
    (tests, docs)."""
    code = "import sys; from kokoro_tvm_ext.cli import build_parser; build_parser(only='say'); print(*sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "kokoro_tvm_ext.cli.say" in loaded
    for other in ("cli.serve", "cli.book", "cli.wyoming", "cli.compile", "cli.voices", "book", "serve.app"):
        assert f"kokoro_tvm_ext.{other}" not in loaded, other
    assert not {m.split(".")[0] for m in loaded} & {"fastapi", "uvicorn", "starlette", "ebooklib", "wyoming", "ray"}
    from kokoro_tvm_ext.cli import COMMANDS, build_parser

    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    assert all(len(commands.choices[name]._actions) > 1 for name, _, _ in COMMANDS)  # more than -h each
