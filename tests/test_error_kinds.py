"""Error kinds: each class's exit code and HTTP status, and `kokoro-tvm`'s exit codes for each kind.

The table (also in the README): 2 the input is wrong, 3 the install (assets, artifact,
CPU) is, 1 a path or the system, 130 interrupted. Only the package's own errors become
one line; anything else is a bug and keeps its traceback. Every case here fails before
synthesis, so no artifact is compiled.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kokoro_tvm_ext import errors
from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.cli import say as say_cmd

# class: (exit code, HTTP status, the builtin an ``except`` written before this hierarchy expects)
TABLE = {
    errors.InvalidInputError: (2, 400, ValueError),
    errors.InvalidVoiceError: (2, 400, ValueError),
    errors.UnknownVoiceError: (2, 400, ValueError),
    errors.AssetError: (3, 503, RuntimeError),
    errors.MissingAssetError: (3, 503, RuntimeError),
    errors.CorruptAssetError: (3, 503, RuntimeError),
    errors.CheckpointMismatchError: (3, 503, RuntimeError),
    errors.ArtifactError: (3, 503, Exception),
    errors.ArtifactMissingError: (3, 503, FileNotFoundError),
    errors.ArtifactCorruptError: (3, 503, ValueError),
    errors.UnsupportedCPUError: (3, 503, ValueError),
    errors.UnwritablePathError: (1, 500, OSError),
    errors.RequestCancelled: (130, 499, Exception),
}


@pytest.mark.parametrize("cls", list(TABLE), ids=lambda c: c.__name__)
def test_each_class_carries_its_exit_code_and_status(cls):
    exit_code, status, builtin = TABLE[cls]
    err = cls("what went wrong")
    assert (err.exit_code, err.http_status) == (exit_code, status)
    assert isinstance(err, errors.KokoroError) and isinstance(err, builtin)
    assert str(err) == "what went wrong"  # one line, as given (OSError too)


def test_every_error_class_is_in_the_table():
    defined = {c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.KokoroError)}
    assert defined - {errors.KokoroError} == set(TABLE)


@pytest.fixture
def voice_file(tmp_path):
    """A voice pack file named like an American English voice: no voice assets needed."""
    path = tmp_path / "af_test.npy"
    np.save(path, np.full((510, 1, 256), 0.1, np.float32))
    return path


def say(tmp_path, *args) -> list[str]:
    return ["say", "--phonemes", "hˈɛlO", "-o", str(tmp_path / "out.wav"), *args]


def corrupt_artifact(tmp_path):
    bad = tmp_path / "corrupt"
    bad.mkdir()
    for name in ("kokoro.so", "weights.bin"):
        (bad / name).write_bytes(b"\0" * 16)
    (bad / "meta.json").write_text('{"format_version": ')
    return bad


def corrupt_voice(tmp_path):
    path = tmp_path / "af_bad.npy"
    np.save(path, np.zeros((510, 128), np.float32))
    return path


CASES = {  # name: (argv after the fixtures are known, exit code, words in the one line)
    "empty text": (lambda t, v: ["say", "", "-o", str(t / "out.wav")], 2, "text is empty"),
    "bad speed": (lambda t, v: say(t, "--voice", str(v), "--speed", "11"), 2, "--speed must be between 0.1 and 10"),
    "unknown voice": (lambda t, v: say(t, "--voice", "xx_nobody"), 2, "unknown voice 'xx_nobody'"),
    "bad blend": (lambda t, v: say(t, "--voice", "af_heart(2)+"), 2, "bad voice blend"),
    "unknown language": (lambda t, v: ["voices", "--lang", "klingon"], 2, "unknown language 'klingon'"),
    "corrupt voice": (lambda t, v: say(t, "--voice", str(corrupt_voice(t))), 3, "expected [510, 1, 256]"),
    "missing artifact": (
        lambda t, v: say(t, "--voice", str(v), "--artifact", str(t)),
        3,
        "no compiled Kokoro artifact",
    ),
    "corrupt artifact": (
        lambda t, v: say(t, "--voice", str(v), "--artifact", str(corrupt_artifact(t))),
        3,
        "meta.json is corrupt",
    ),
    "missing voice sdist": (
        lambda t, v: ["voices", "--install", "--from", str(t / "nope.tar.gz")],
        3,
        "does not exist",
    ),
    "no such directory": (lambda t, v: ["say", "Hi.", "-o", str(t / "no" / "out.wav")], 1, "does not exist"),
    "output is a directory": (lambda t, v: ["say", "Hi.", "-o", str(t)], 1, "it is a directory"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_exit_codes_by_kind(case, tmp_path, voice_file, capsys, monkeypatch):
    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    make_argv, code, words = CASES[case]
    assert main(make_argv(tmp_path, voice_file)) == code
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out.wav").exists()


def test_an_os_error_is_exit_1(tmp_path, monkeypatch, capsys):
    def disk_full(path):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(say_cmd, "_check_writable", disk_full)
    assert main(["say", "Hi.", "-o", str(tmp_path / "out.wav")]) == 1
    assert "kokoro-tvm say: [Errno 28] No space left on device" in capsys.readouterr().err


def test_ctrl_c_is_exit_130(tmp_path, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(say_cmd, "_check", interrupted)
    assert main(["say", "Hi.", "-o", str(tmp_path / "out.wav")]) == 130
    assert "interrupted; no output was written" in capsys.readouterr().err


@pytest.mark.parametrize("asked", [False, True])
def test_our_warnings_are_one_line_and_others_show_only_when_asked(asked, tmp_path, monkeypatch, capsys, recwarn):
    import warnings

    def warns(args):
        warnings.warn("the text has no French characters", errors.InputWarning, stacklevel=2)
        warnings.warn("a library's deprecation", DeprecationWarning, stacklevel=2)
        warnings.warn("a library's notice", UserWarning, stacklevel=2)
        raise errors.InvalidInputError("stop here")

    monkeypatch.setattr(say_cmd, "_check", warns)
    monkeypatch.setattr(sys, "warnoptions", ["default"] if asked else [])  # python -W default / $PYTHONWARNINGS
    assert main(["say", "Hi.", "-o", str(tmp_path / "out.wav")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "kokoro-tvm say: warning: the text has no French characters",
        "kokoro-tvm say: stop here",
    ]
    # Other libraries' warnings go where Python sends them (here: pytest's record) only when asked for.
    others = [str(w.message) for w in recwarn if not issubclass(w.category, errors.KokoroWarning)]
    assert others == (["a library's deprecation", "a library's notice"] if asked else [])


def test_ctrl_c_that_a_library_turns_into_another_error_is_still_exit_130(tmp_path, monkeypatch, capsys):
    """torch.export's tracing context raises KeyError from its `finally` when Ctrl-C lands inside it."""

    def interrupted_inside_a_library(args):
        try:
            raise KeyboardInterrupt
        finally:
            raise KeyError("custom")

    monkeypatch.setattr(say_cmd, "_check", interrupted_inside_a_library)
    assert main(["say", "Hi.", "-o", str(tmp_path / "out.wav")]) == 130
    err = capsys.readouterr().err
    assert "interrupted; no output was written" in err and "Traceback" not in err


@pytest.mark.parametrize("bug", [TypeError, ValueError, KeyError])
def test_an_internal_bug_is_not_a_user_error(bug, tmp_path, monkeypatch):
    """A ValueError from our own code (not an InvalidInputError) used to print as bad input."""

    def broken(args):
        raise bug("an internal bug")

    monkeypatch.setattr(say_cmd, "_check", broken)
    with pytest.raises(bug, match="an internal bug"):
        main(["say", "Hi.", "-o", str(tmp_path / "out.wav")])


def test_the_installed_command_shows_a_bugs_traceback_and_exits_1(tmp_path):
    code = textwrap.dedent("""
        from kokoro_tvm_ext.cli import console_main, say

        def broken(args):
            raise TypeError("an internal bug")

        say._check = broken
        console_main()
    """)
    out = tmp_path / "out.wav"
    result = subprocess.run(
        [sys.executable, "-c", code, "say", "Hi.", "-o", str(out)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" in result.stderr and "TypeError: an internal bug" in result.stderr
    assert not out.exists()


def test_an_artifact_of_another_tvm_is_an_artifact_error(tmp_path, voice_file, capsys):
    """Refused like a damaged one (exit 3), naming both versions, before its library is loaded."""
    from fake_artifact import fake_meta_fields

    from kokoro_tvm_ext.model.runtime.artifact import write_meta

    for name in ("kokoro.so", "weights.bin"):
        (tmp_path / name).write_bytes(b"\0" * 16)  # never loaded: the version is checked first
    write_meta(tmp_path, fake_meta_fields(tvm="0.1.0"))
    assert main(say(tmp_path, "--voice", str(voice_file), "--artifact", str(tmp_path))) == 3
    err = capsys.readouterr().err
    assert "was compiled with TVM 0.1.0, this is TVM" in err and "compile again" in err, err
